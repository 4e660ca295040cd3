# Run by tensordict_deps.bzl's tensordict_python_repository with the configured interpreter:
# prints, as key=value lines, where this Python's headers, torch and pybind11 are.
import os
import sys
import sysconfig

out = {
    "python_include": sysconfig.get_paths()["include"],
    "python_version": "%d.%d" % sys.version_info[:2],
}
try:
    import torch
except Exception as e:  # reported by the repository rule
    out["torch_error"] = "%s: %s" % (type(e).__name__, e)
else:
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    out["torch_version"] = torch.__version__
    out["torch_lib"] = os.path.join(torch_dir, "lib")
    out["torch_include"] = os.path.join(torch_dir, "include")
try:
    import pybind11
    out["pybind11_module_include"] = pybind11.get_include()
except Exception:
    pass
for key, value in out.items():
    print("%s=%s" % (key, str(value).replace("\n", " ")))
