# Compiles bench/insn_loops.cpp with each compiler and requires every C++
# loop to be the same instructions as its C twin (loop_insns.py --same).
foreach(cxx ${GXX} ${CLANGXX})
  get_filename_component(tag ${cxx} NAME)
  set(so ${BIN}/insn_loops_cxx_${tag}.so)
  execute_process(COMMAND ${cxx} -std=c++17 -O2 -fPIC -shared -I${SRC}/include -I${BIN}/include
    ${SRC}/bench/insn_loops.cpp -o ${so} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${cxx}: bench/insn_loops.cpp:\n${err}")
  endif()
  foreach(pair "c_inc_loop;cxx_ref_inc_loop" "c_inc_loop_indirect;cxx_inc_loop_indirect"
               "c_add_loop;cxx_add_loop" "c_gauge_loop;cxx_gauge_loop"
               "c_record_loop;cxx_record_loop" "c_group_loop;cxx_group_loop"
               "c_owned_add_loop;cxx_owned_add_loop" "c_owned_array_loop;cxx_owned_array_loop")
    list(GET pair 0 c)
    list(GET pair 1 x)
    execute_process(COMMAND ${PYTHON} ${SRC}/bench/loop_insns.py --same ${so} ${c} ${x}
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${tag}: ${x} is not ${c}:\n${out}")
    endif()
    string(REGEX MATCH "[^\n]*the same[^\n]*" line "${out}")
    message("${tag}: ${line}")
  endforeach()
endforeach()
