# The layers, lowest first. A layer may include its own headers and those of the layers below
# it, never one above:
# client -> daemon -> jobs -> ops -> runtime -> api -> transport -> wire -> common.
set(SYMMESH_LAYERS common wire transport api runtime ops jobs daemon client)

# Gives `target` exactly one include directory of its own, holding only `layer`'s headers (a
# link named after the layer's source directory), so `#include "layer/x.h"` resolves only for
# the targets that link that layer: a lower layer that includes a higher one does not compile.
function(symmesh_layer target layer)
  set(root ${PROJECT_BINARY_DIR}/include/${layer})
  file(MAKE_DIRECTORY ${root})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${layer} ${root}/${layer} SYMBOLIC)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
endfunction()

# Fails the build, naming the file and the rule, when a source includes a layer above its own.
# The include directories above already make such an include fail to compile; this says why.
function(symmesh_check_layers)
  add_custom_target(symmesh_layer_check ALL
    COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} "-DLAYERS=${SYMMESH_LAYERS}"
            -P ${PROJECT_SOURCE_DIR}/cmake/check_layers.cmake
    COMMENT "Checking that no layer includes a layer above it"
    VERBATIM)
endfunction()
