# Compiles every public C++ header alone (-fsyntax-only) with each compiler,
# -std=c++17 -Wall -Wextra -Werror; fails naming the first that does not.
# The prometheus-cpp layer's headers also with -fno-exceptions, as
# prometheus-cpp's own compile (their throws live in the library).
if(NOT GXX OR NOT CLANGXX)
  message(FATAL_ERROR "g++ and clang++ are both needed (scripts/install-deps.sh)")
endif()
file(GLOB hpp RELATIVE ${SRC}/include ${SRC}/include/pcpu/*.hpp ${SRC}/include/pcpu/cxx/*.hpp)
file(GLOB_RECURSE compat RELATIVE ${SRC}/compat/prometheus-cpp/include ${SRC}/compat/prometheus-cpp/include/prometheus/*.h ${SRC}/compat/prometheus-cpp/include/pcpu/*.hpp)
set(n 0)
foreach(cxx ${GXX} ${CLANGXX})
  foreach(h ${hpp} ${compat})
    file(WRITE ${BIN}/cxx_hdr.cpp "#include <${h}>\n#include <${h}>\n")
    execute_process(COMMAND ${cxx} -std=c++17 -Wall -Wextra -Werror -pedantic -fsyntax-only
      -I${SRC}/include -I${BIN}/include -I${SRC}/compat/prometheus-cpp/include ${BIN}/cxx_hdr.cpp
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${cxx}: <${h}> does not compile alone:\n${out}")
    endif()
    math(EXPR n "${n} + 1")
  endforeach()
  foreach(h ${compat})
    file(WRITE ${BIN}/cxx_hdr.cpp "#include <${h}>\n")
    execute_process(COMMAND ${cxx} -std=c++17 -Wall -Wextra -Werror -pedantic -fno-exceptions -fsyntax-only
      -I${SRC}/include -I${BIN}/include -I${SRC}/compat/prometheus-cpp/include ${BIN}/cxx_hdr.cpp
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${cxx} -fno-exceptions: <${h}> does not compile:\n${out}")
    endif()
    math(EXPR n "${n} + 1")
  endforeach()
endforeach()
message("C++ headers: ${n} compilations clean")
