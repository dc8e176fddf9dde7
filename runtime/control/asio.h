// The one place that includes Boost.Asio. Boost 1.74's asio/awaitable.hpp uses std::exchange
// without including <utility>, which GCC 12 in C++20 mode rejects; including it first fixes
// that. Every control-plane file includes this header instead of <boost/asio.hpp>.
// Thread-safety: n/a (includes only).
#pragma once

#include <utility>

#include <boost/asio.hpp>
