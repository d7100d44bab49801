# Section 3 manual pages: man/man3/*.3 each document several functions (the
# names before "\-" in their NAME section). For every other name a page
# lists, this writes a one-line link page, `.so man3/<page>.3`, into
# <binary dir>/man/man3, so that `man pcpu_counter_inc` finds the page of
# pcpu_counter_add (dh_installman turns such pages into symbolic links).
# tests/docs/check_man.py checks that every exported function and every
# public inline function ends up with a page.
#
# Each page belongs to the library its LIBRARY section names first, and
# installs with that library's development files: the pages (and their link
# pages) of libpcpu-stats ("pcpu statistics library") go to <prefix>_STATS,
# those of libpcpu-exporter ("pcpu exporter library") to <prefix>_EXPORTER,
# every other page to <prefix>_CORE (lists of full paths, set in the
# caller's scope).
function(pcpu_man_links srcdir outdir prefix)
  file(GLOB pages RELATIVE "${srcdir}" "${srcdir}/*.3")
  file(MAKE_DIRECTORY "${outdir}")
  file(GLOB old "${outdir}/*.3")
  if(old)
    file(REMOVE ${old})
  endif()
  set(core)
  set(stats)
  set(exporter)
  foreach(page ${pages})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${srcdir}/${page}")
    file(READ "${srcdir}/${page}" text)
    # The LIBRARY section's first line names the page's library: "pcpu
    # library" or "pcpu statistics library" (a page of libpcpu's may name
    # libpcpu-stats further on, for one function or for the layer above).
    set(lib core)
    if(text MATCHES "\n\\.SH LIBRARY\npcpu statistics library")
      set(lib stats)
    elseif(text MATCHES "\n\\.SH LIBRARY\npcpu exporter library")
      set(lib exporter)
    endif()
    list(APPEND ${lib} "${srcdir}/${page}")
    # The NAME section: from ".SH NAME" to the "\-" that ends the names.
    string(FIND "${text}" ".SH NAME\n" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "man/man3/${page}: no NAME section")
    endif()
    math(EXPR at "${at} + 9")
    string(SUBSTRING "${text}" ${at} -1 text)
    string(FIND "${text}" "\\-" end)
    string(SUBSTRING "${text}" 0 ${end} names)
    string(REPLACE "\n" " " names "${names}")
    string(REPLACE "," ";" names "${names}")
    string(REGEX REPLACE "\\.3$" "" self "${page}")
    foreach(name ${names})
      string(STRIP "${name}" name)
      if(name STREQUAL "" OR name STREQUAL self OR EXISTS "${srcdir}/${name}.3")
        continue()
      endif()
      file(WRITE "${outdir}/${name}.3" ".so man3/${page}\n")
      list(APPEND ${lib} "${outdir}/${name}.3")
    endforeach()
  endforeach()
  set(${prefix}_CORE ${core} PARENT_SCOPE)
  set(${prefix}_STATS ${stats} PARENT_SCOPE)
  set(${prefix}_EXPORTER ${exporter} PARENT_SCOPE)
endfunction()
