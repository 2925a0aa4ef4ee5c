# lit configuration for Conduit's IR and tool tests.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "CONDUIT"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.conduit_obj_root, "tests", "lit")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["conduit-opt", "conduit-compile", "conduit-run", "conduit-tune", "kernel_model"],
    [config.conduit_tools_dir])
config.substitutions.append(("%testdata", os.path.join(config.conduit_source_dir, "testdata")))
config.substitutions.append(("%python", "python3"))
config.substitutions.append(
    ("%expect-exit", "python3 " + os.path.join(config.test_source_root, "Inputs", "expect-exit.py")))
