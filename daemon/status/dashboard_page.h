// The dashboard page (daemon/status/dashboard.html), served at GET /.
#pragma once

namespace symmesh {

const char* dashboard_html();

}  // namespace symmesh
