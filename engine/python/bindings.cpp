// nanobind binding of the engine core: xfer._xfer. It builds per Python or, from Python 3.12, for
// the stable ABI (one abi3 extension serving 3.12+). Same Python API as bindings_pybind11.cpp, the
// benchmark comparison.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <new>
#include <tuple>

#include "xfer/engine.h"
#include "xfer/master.h"

namespace nb = nanobind;

namespace {

nb::dict region_dict(const xfer::Region& r) {
  nb::dict d;
  d["addr"] = r.addr;
  d["length"] = r.length;
  d["kind"] = r.kind == xfer::MemKind::kDevice ? "device" : "host";
  d["device"] = r.device;
  d["alloc_base"] = r.alloc_base;
  d["alloc_size"] = r.alloc_size;
  d["offset"] = r.offset;
  d["dmabuf"] = r.dmabuf;
  d["dmabuf_reason"] = r.dmabuf_reason;
  d["rdma"] = r.rdma;
  d["rdma_reason"] = r.rdma_reason;
  return d;
}

using Entry = std::tuple<uintptr_t, std::string, uint64_t, size_t>;

std::vector<xfer::Request> to_requests(const std::vector<Entry>& batch) {
  std::vector<xfer::Request> out;
  out.reserve(batch.size());
  for (const auto& e : batch) out.push_back({std::get<0>(e), std::get<1>(e), std::get<2>(e), std::get<3>(e)});
  return out;
}

// (address, nbytes, readonly) of a C-contiguous buffer-protocol object (PyObject_GetBuffer is in the
// limited API from 3.11).
nb::tuple buffer_info(nb::handle obj) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_ANY_CONTIGUOUS) != 0) throw nb::python_error();
  nb::tuple t = nb::make_tuple(reinterpret_cast<uintptr_t>(view.buf), static_cast<size_t>(view.len),
                               static_cast<bool>(view.readonly));
  PyBuffer_Release(&view);
  return t;
}

void transfer(xfer::Engine& e, const std::vector<Entry>& batch, bool is_write) {
  auto reqs = to_requests(batch);
  nb::gil_scoped_release nogil;
  if (is_write) {
    e.write(reqs);
  } else {
    e.read(reqs);
  }
}

}  // namespace

NB_MODULE(_xfer, m) {
  // Engines a program never closes are still alive at exit; pybind11 said nothing, neither do we.
  nb::set_leak_warnings(false);
  m.doc() = "xfer transfer engine core (C++)";
  nb::exception<xfer::Error>(m, "XferError", PyExc_RuntimeError);
  m.attr("__version__") = xfer::version();
  m.attr("BACKEND") = xfer::backend_name();
  m.def("buffer_info", &buffer_info, nb::arg("obj"));

  nb::class_<xfer::Engine>(m, "Engine")
      .def(
          "__init__",
          [](xfer::Engine* self, std::string name, std::string master, std::string host, uint16_t port,
             size_t chunk_bytes, int window) {
            xfer::EngineOptions o;
            o.host = std::move(host);
            o.port = port;
            o.chunk_bytes = chunk_bytes;
            o.window = window;
            nb::gil_scoped_release nogil;
            new (self) xfer::Engine(std::move(name), std::move(master), o);
          },
          nb::arg("name"), nb::arg("master"), nb::arg("host") = "127.0.0.1", nb::arg("port") = 0,
          nb::arg("chunk_bytes") = size_t{4u << 20}, nb::arg("window") = 16)
      .def("register_memory",
           [](xfer::Engine& e, uintptr_t addr, size_t length) {
             xfer::Region r;
             {
               nb::gil_scoped_release nogil;
               r = e.register_memory(addr, length);
             }
             return region_dict(r);
           })
      .def("unregister_memory", &xfer::Engine::unregister_memory, nb::call_guard<nb::gil_scoped_release>())
      .def("regions",
           [](xfer::Engine& e) {
             nb::list out;
             for (auto& r : e.regions()) out.append(region_dict(r));
             return out;
           })
      .def("write", [](xfer::Engine& e, const std::vector<Entry>& batch) { transfer(e, batch, true); })
      .def("read", [](xfer::Engine& e, const std::vector<Entry>& batch) { transfer(e, batch, false); })
      .def("add_peer", &xfer::Engine::add_peer)
      .def("peer",
           [](xfer::Engine& e, const std::string& seg) {
             xfer::SegmentInfo info;
             {
               nb::gil_scoped_release nogil;
               info = e.peer(seg);
             }
             nb::dict d;
             d["host"] = info.host;
             d["port"] = info.port;
             nb::list regions;
             for (auto& r : info.regions) {
               nb::dict rd;
               rd["addr"] = r.addr;
               rd["length"] = r.length;
               rd["kind"] = r.kind;
               regions.append(rd);
             }
             d["regions"] = regions;
             return d;
           })
      .def("device_alloc", &xfer::Engine::device_alloc)
      .def("device_free", &xfer::Engine::device_free)
      .def("copy", &xfer::Engine::copy, nb::call_guard<nb::gil_scoped_release>())
      .def("close", &xfer::Engine::close, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("name", &xfer::Engine::name)
      .def_prop_ro("port", &xfer::Engine::port)
      .def_prop_ro("endpoint", &xfer::Engine::endpoint)
      .def_prop_ro("backend", &xfer::Engine::backend)
      .def_prop_ro("runtime_version", &xfer::Engine::runtime_version)
      .def_prop_ro("device_count", &xfer::Engine::device_count)
      .def_prop_ro("gpu_direct", &xfer::Engine::gpu_direct)
      .def_prop_ro("gpu_direct_reason", &xfer::Engine::gpu_direct_reason);
}
