# The console scripts of tools/pyproject.toml ([project.scripts]) as PREFIX/bin/archbench-COMMAND,
# each running its command from the package that the top-level CMakeLists.txt installs in
# PREFIX/share/archbench/tools: what `pip install ./tools` gives, without pip, and relocatable
# with the tree.
set(_pyproject ${CMAKE_CURRENT_LIST_DIR}/pyproject.toml)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_pyproject})
set(_entry "^(archbench-[a-z]+) = \"(archbench\\.commands\\.[a-z]+):main\"$")
file(STRINGS ${_pyproject} _lines REGEX "${_entry}")
foreach(_line IN LISTS _lines)
  string(REGEX REPLACE "${_entry}" "\\1" _script "${_line}")
  string(REGEX REPLACE "${_entry}" "\\2" _module "${_line}")
  file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/console_scripts/${_script} @ONLY CONTENT [=[#!/usr/bin/env python3
"""@_script@ (tools/pyproject.toml): @_module@ from the package in ../share/archbench/tools."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, "share", "archbench", "tools"))
from @_module@ import main  # noqa: E402

sys.exit(main())
]=])
  install(PROGRAMS ${CMAKE_BINARY_DIR}/console_scripts/${_script} DESTINATION bin)
endforeach()
