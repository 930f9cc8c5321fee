// pybind11 binding of the engine core: xfer._xfer. Kept only as the comparison in
// benchmarks/binding_bench.py (-DXFER_BINDING=pybind11); the wheels use bindings.cpp (nanobind).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tuple>

#include "xfer/engine.h"
#include "xfer/master.h"

namespace py = pybind11;

namespace {

py::dict region_dict(const xfer::Region& r) {
  py::dict d;
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

// (address, nbytes, readonly) of a C-contiguous buffer-protocol object.
py::tuple buffer_info(py::object obj) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_ANY_CONTIGUOUS) != 0) throw py::error_already_set();
  py::tuple t = py::make_tuple(reinterpret_cast<uintptr_t>(view.buf), static_cast<size_t>(view.len),
                               static_cast<bool>(view.readonly));
  PyBuffer_Release(&view);
  return t;
}

}  // namespace

PYBIND11_MODULE(_xfer, m) {
  m.doc() = "xfer transfer engine core (C++)";
  py::register_exception<xfer::Error>(m, "XferError", PyExc_RuntimeError);
  m.attr("__version__") = xfer::version();
  m.attr("BACKEND") = xfer::backend_name();
  m.def("buffer_info", &buffer_info, py::arg("obj"));

  py::class_<xfer::Engine>(m, "Engine")
      .def(py::init([](std::string name, std::string master, std::string host, uint16_t port, size_t chunk_bytes,
                       int window) {
             xfer::EngineOptions o;
             o.host = std::move(host);
             o.port = port;
             o.chunk_bytes = chunk_bytes;
             o.window = window;
             py::gil_scoped_release nogil;
             return new xfer::Engine(std::move(name), std::move(master), o);
           }),
           py::arg("name"), py::arg("master"), py::arg("host") = "127.0.0.1", py::arg("port") = 0,
           py::arg("chunk_bytes") = 4u << 20, py::arg("window") = 16)
      .def("register_memory",
           [](xfer::Engine& e, uintptr_t addr, size_t length) {
             xfer::Region r;
             {
               py::gil_scoped_release nogil;
               r = e.register_memory(addr, length);
             }
             return region_dict(r);
           })
      .def("unregister_memory", &xfer::Engine::unregister_memory, py::call_guard<py::gil_scoped_release>())
      .def("regions",
           [](xfer::Engine& e) {
             py::list out;
             for (auto& r : e.regions()) out.append(region_dict(r));
             return out;
           })
      .def("write",
           [](xfer::Engine& e, const std::vector<Entry>& batch) {
             auto reqs = to_requests(batch);
             py::gil_scoped_release nogil;
             e.write(reqs);
           })
      .def("read",
           [](xfer::Engine& e, const std::vector<Entry>& batch) {
             auto reqs = to_requests(batch);
             py::gil_scoped_release nogil;
             e.read(reqs);
           })
      .def("add_peer", &xfer::Engine::add_peer)
      .def("peer",
           [](xfer::Engine& e, const std::string& seg) {
             xfer::SegmentInfo info;
             {
               py::gil_scoped_release nogil;
               info = e.peer(seg);
             }
             py::dict d;
             d["host"] = info.host;
             d["port"] = info.port;
             py::list regions;
             for (auto& r : info.regions) {
               py::dict rd;
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
      .def("copy", &xfer::Engine::copy, py::call_guard<py::gil_scoped_release>())
      .def("close", &xfer::Engine::close, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("name", &xfer::Engine::name)
      .def_property_readonly("port", &xfer::Engine::port)
      .def_property_readonly("endpoint", &xfer::Engine::endpoint)
      .def_property_readonly("backend", &xfer::Engine::backend)
      .def_property_readonly("runtime_version", &xfer::Engine::runtime_version)
      .def_property_readonly("device_count", &xfer::Engine::device_count)
      .def_property_readonly("gpu_direct", &xfer::Engine::gpu_direct)
      .def_property_readonly("gpu_direct_reason", &xfer::Engine::gpu_direct_reason);
}
