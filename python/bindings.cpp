// The Python module's native part, symmesh._symmesh: Session's calls on raw addresses and
// counts, the GIL released while they wait. The package (symmesh/__init__.py) turns numpy
// arrays and torch tensors into those and back. Errors: a wrong call raises ValueError, one
// the cluster could not carry out RuntimeError (TimeoutError for a deadline), with the
// library's message.
#include <algorithm>
#include <cmath>

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "api/session.h"
#include "client/session_seat.h"
#include "common/errors.h"
#include "wire/enum_text.h"

namespace py = pybind11;

namespace symmesh {
namespace {

using Address = uintptr_t;

void* at(Address address) {
  return reinterpret_cast<void*>(address);
}

wire::DataType dtype_named(const std::string& name) {
  return wire::parse_enum<wire::DataType>(name, "dtype");
}

wire::Reduction reduction_named(const std::string& name) {
  return wire::parse_enum<wire::Reduction>(name, "op");
}

wire::MatmulMode mode_named(const std::string& name) {
  return wire::parse_enum<wire::MatmulMode>(name, "mode");
}

// Seconds from Python as a duration: NaN or under 0 is 0, over a day is a day (a longer wait
// would overflow the deadline it is added to).
std::chrono::microseconds duration_of(double seconds) {
  constexpr double kDay = 86400.0;
  const double bounded = std::isnan(seconds) ? 0.0 : std::clamp(seconds, 0.0, kDay);
  return std::chrono::microseconds(int64_t(bounded * 1e6));
}

Deadline deadline_in(double seconds) {
  return Clock::now() + duration_of(seconds);
}

// Releases the GIL for a blocking call.
using Unlocked = py::call_guard<py::gil_scoped_release>;

}  // namespace
}  // namespace symmesh

PYBIND11_MODULE(_symmesh, m) {
  using namespace symmesh;
  m.doc() = "symmesh's native calls; use the symmesh package";
  // Translators are tried last registered first: the most derived goes last.
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<TimeoutError>(m, "DeadlineExceeded", PyExc_TimeoutError);
  py::register_exception<InvalidArgument>(m, "InvalidArgument", PyExc_ValueError);

  // Joining a session from a process `symmesh launch` did not start (client/session_seat.h).
  m.def(
      "find_seat",
      [](const std::string& daemon, const std::string& secret_file, int rank, int world_size,
         double timeout_s) {
        const SessionSeat seat = find_seat(parse_host_port(daemon, "SYMMESH_DAEMON"), secret_file,
                                           rank, world_size, deadline_in(timeout_s));
        // A std::tuple: made into Python's once the GIL is held again.
        return std::make_tuple(seat.attach_socket, seat.local_rank, seat.node_rank, seat.nodes,
                               seat.ranks_per_node);
      },
      Unlocked());
  m.def(
      "start_session",
      [](const std::string& daemon, const std::string& secret_file, uint32_t attach_timeout_s,
         double timeout_s) {
        return start_session(parse_host_port(daemon, "SYMMESH_DAEMON"), secret_file,
                             attach_timeout_s, deadline_in(timeout_s));
      },
      Unlocked());

  py::class_<DispatchHandle, std::shared_ptr<DispatchHandle>>(m, "DispatchHandle")
      .def_readonly("tokens", &DispatchHandle::tokens)
      .def_readonly("received", &DispatchHandle::received)
      .def_readonly("hidden", &DispatchHandle::hidden)
      .def_readonly("topk", &DispatchHandle::topk)
      .def_readonly("experts", &DispatchHandle::experts)
      .def_readonly("max_tokens", &DispatchHandle::max_tokens)
      .def_property_readonly("dtype",
                             [](const DispatchHandle& h) { return wire::enum_text(h.dtype); });

  // A call's output lent where the daemon wrote it: numpy and torch make tensors over its buffer,
  // which keep it (and so its bytes) until they go.
  py::class_<StagingLoan, std::shared_ptr<StagingLoan>>(m, "StagingLoan", py::buffer_protocol())
      .def_buffer([](StagingLoan& loan) {
        return py::buffer_info(static_cast<void*>(loan.data()), 1,
                               py::format_descriptor<uint8_t>::format(), 1, {ssize_t(loan.bytes())},
                               {ssize_t(1)}, false);
      });

  py::class_<Session>(m, "Session")
      .def_static(
          "attach",
          [](const std::string& socket, int local_rank, double timeout_s) {
            return Session::attach(socket, local_rank,
                                   std::chrono::milliseconds(int64_t(timeout_s * 1000)));
          },
          Unlocked())
      .def_static(
          "attach_from_environment",
          [](double timeout_s) {
            return Session::attach_from_environment(
                std::chrono::milliseconds(int64_t(timeout_s * 1000)));
          },
          Unlocked())
      .def_property_readonly("rank", [](const Session& s) { return s.place().rank; })
      .def_property_readonly("world_size", [](const Session& s) { return s.place().world_size; })
      .def_property_readonly("local_rank", [](const Session& s) { return s.place().local_rank; })
      .def_property_readonly("local_size", [](const Session& s) { return s.place().local_size; })
      .def_property_readonly("node_rank", [](const Session& s) { return s.place().node_rank; })
      .def_property_readonly("heap_bytes", &Session::heap_bytes)
      .def(
          "malloc", [](Session& s, size_t bytes) { return Address(s.malloc(bytes)); }, Unlocked())
      .def(
          "free", [](Session& s, Address address) { s.free(at(address)); }, Unlocked())
      .def("on_heap", [](const Session& s, Address address,
                         size_t bytes) { return s.on_heap(at(address), bytes); })
      .def("heap_view",
           [](const Session& s, Address address, size_t bytes) {
             if (!s.on_heap(at(address), bytes)) {
               throw InvalidArgument("heap_view: the bytes are not on this PE's heap");
             }
             return py::memoryview::from_memory(at(address), ssize_t(bytes));
           })
      .def("ping", &Session::ping, Unlocked())
      .def("detach", &Session::detach, Unlocked())
      .def(
          "get",
          [](Session& s, Address dst, Address src, size_t bytes, int pe, Address done,
             uint64_t done_value) {
            s.get(at(dst), at(src), bytes, pe, static_cast<const uint64_t*>(at(done)), done_value);
          },
          Unlocked())
      .def(
          "put_signal",
          [](Session& s, Address dst, Address src, size_t bytes, Address signal, uint64_t value,
             int pe) {
            s.put_signal(at(dst), at(src), bytes, static_cast<const uint64_t*>(at(signal)), value,
                         pe);
          },
          Unlocked())
      // The index of the first word that no longer holds its value in `seen`, or -1 at the
      // timeout.
      .def(
          "wait_for_word_change",
          [](const Session& s, const std::vector<Address>& words, const std::vector<uint64_t>& seen,
             double timeout_s) {
            std::vector<const uint64_t*> pointers;
            for (const Address word : words) {
              pointers.push_back(static_cast<const uint64_t*>(at(word)));
            }
            return s.wait_for_word_change(pointers, seen, duration_of(timeout_s));
          },
          Unlocked())
      .def("barrier", &Session::barrier, Unlocked())
      .def("wait_stats",
           [](Session& s) {
             Session::WaitStats stats;
             {
               const py::gil_scoped_release unlocked;
               stats = s.wait_stats();
             }
             py::dict out;
             out["wait_by_peer_s"] = stats.wait_by_peer_s;
             out["blocked_s"] = stats.blocked_s;
             return out;
           })
      .def(
          "all_reduce",
          [](Session& s, Address dst, Address src, size_t count, const std::string& dtype,
             const std::string& op) {
            s.all_reduce(at(dst), at(src), count, dtype_named(dtype), reduction_named(op));
          },
          Unlocked())
      .def(
          "reduce_scatter",
          [](Session& s, Address dst, Address src, size_t count, const std::string& dtype,
             const std::string& op) {
            s.reduce_scatter(at(dst), at(src), count, dtype_named(dtype), reduction_named(op));
          },
          Unlocked())
      .def(
          "all_gather",
          [](Session& s, Address dst, Address src, size_t count, const std::string& dtype) {
            s.all_gather(at(dst), at(src), count, dtype_named(dtype));
          },
          Unlocked())
      .def(
          "broadcast",
          [](Session& s, Address dst, Address src, size_t bytes, int root) {
            s.broadcast(at(dst), at(src), bytes, root);
          },
          Unlocked())
      .def(
          "all_to_all",
          [](Session& s, Address dst, Address src, size_t count, const std::string& dtype) {
            s.all_to_all(at(dst), at(src), count, dtype_named(dtype));
          },
          Unlocked())
      // allocate(received) -> (recv_x, recv_topk_idx, recv_topk_weights) addresses; recv_x is
      // written in place at `room` (room_rows rows) when that is on the heap and it fits. An
      // allocate that answers 0 for recv_x gets it lent: (handle, loan or None).
      .def(
          "dispatch",
          [](Session& s, Address x, Address topk_idx, Address topk_weights, int64_t tokens,
             int64_t hidden, int topk, int experts, const std::string& dtype,
             const std::function<py::tuple(int64_t)>& allocate, Address room, int64_t room_rows,
             uint64_t active_nodes) {
            std::shared_ptr<StagingLoan> lent;
            const auto handle = s.dispatch(
                at(x), static_cast<const int64_t*>(at(topk_idx)),
                static_cast<const float*>(at(topk_weights)), tokens, hidden, topk, experts,
                dtype_named(dtype),
                [&](int64_t received) {
                  py::gil_scoped_acquire locked;
                  const py::tuple to = allocate(received);
                  return DispatchOutputs{at(to[0].cast<Address>()),
                                         static_cast<int64_t*>(at(to[1].cast<Address>())),
                                         static_cast<float*>(at(to[2].cast<Address>()))};
                },
                RecvRoom{at(room), room_rows}, &lent, active_nodes);
            return std::make_pair(handle, lent);
          },
          Unlocked())
      // An out of 0: the result is lent (the loan, or None for no tokens).
      .def(
          "combine",
          [](Session& s, const DispatchHandle& handle, Address rows, int64_t hidden,
             const std::string& dtype, Address bias, Address out) -> std::shared_ptr<StagingLoan> {
            const void* b = bias ? at(bias) : nullptr;
            if (!out) return s.combine(handle, at(rows), hidden, dtype_named(dtype), b);
            s.combine(handle, at(rows), hidden, dtype_named(dtype), b, at(out));
            return nullptr;
          },
          Unlocked())
      // allocate(received) -> (recv_x, recv_counts) addresses; `room` and lending as for
      // dispatch.
      .def(
          "low_latency_dispatch",
          [](Session& s, Address x, Address topk_idx, Address topk_weights, int64_t tokens,
             int64_t hidden, int topk, int experts, int64_t max_tokens, const std::string& dtype,
             const std::function<py::tuple(int64_t)>& allocate, Address room, int64_t room_rows) {
            std::shared_ptr<StagingLoan> lent;
            const auto handle = s.low_latency_dispatch(
                at(x), static_cast<const int64_t*>(at(topk_idx)),
                static_cast<const float*>(at(topk_weights)), tokens, hidden, topk, experts,
                max_tokens, dtype_named(dtype),
                [&](int64_t received) {
                  py::gil_scoped_acquire locked;
                  const py::tuple to = allocate(received);
                  return LowLatencyOutputs{at(to[0].cast<Address>()),
                                           static_cast<int64_t*>(at(to[1].cast<Address>()))};
                },
                RecvRoom{at(room), room_rows}, &lent);
            return std::make_pair(handle, lent);
          },
          Unlocked())
      .def(
          "low_latency_combine",
          [](Session& s, const DispatchHandle& handle, Address rows,
             Address out) -> std::shared_ptr<StagingLoan> {
            if (!out) return s.low_latency_combine(handle, at(rows));
            s.low_latency_combine(handle, at(rows), at(out));
            return nullptr;
          },
          Unlocked())
      .def(
          "gemm_all_reduce",
          [](Session& s, Address a, Address b, Address c, int64_t m, int64_t n, int64_t k,
             const std::string& dtype, const std::string& mode) {
            s.gemm_all_reduce(at(a), at(b), at(c), m, n, k, dtype_named(dtype), mode_named(mode));
          },
          Unlocked())
      .def(
          "matmul_reduce_scatter",
          [](Session& s, Address a, Address b, Address c, int64_t m, int64_t n, int64_t k,
             const std::string& dtype, const std::string& mode) {
            return s.matmul_reduce_scatter(at(a), at(b), at(c), m, n, k, dtype_named(dtype),
                                           mode_named(mode));
          },
          Unlocked())
      .def(
          "all_gather_matmul",
          [](Session& s, Address a, Address b, Address c, Address gathered, int64_t rows, int64_t n,
             int64_t k, const std::string& dtype, const std::string& mode) {
            s.all_gather_matmul(at(a), at(b), at(c), at(gathered), rows, n, k, dtype_named(dtype),
                                mode_named(mode));
          },
          Unlocked());
}
