# The web console's sources, compiled in as they are (server/console.h): writes them into
# <build>/generated/server/console_assets.h; editing one re-runs CMake. Included by the
# server's and the fuzz tree's CMakeLists, which add QUEEN_GENERATED_DIR to their includes.
set(QUEEN_CONSOLE_SOURCE_DIR ${CMAKE_SOURCE_DIR}/server/console)
set(QUEEN_GENERATED_DIR ${CMAKE_BINARY_DIR}/generated)
set(QUEEN_CONSOLE_FILES ${QUEEN_CONSOLE_SOURCE_DIR}/index.html
    ${QUEEN_CONSOLE_SOURCE_DIR}/console.css ${QUEEN_CONSOLE_SOURCE_DIR}/console.js)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${QUEEN_CONSOLE_FILES})
file(READ ${QUEEN_CONSOLE_SOURCE_DIR}/index.html CONSOLE_HTML)
file(READ ${QUEEN_CONSOLE_SOURCE_DIR}/console.css CONSOLE_CSS)
file(READ ${QUEEN_CONSOLE_SOURCE_DIR}/console.js CONSOLE_JS)
foreach(text CONSOLE_HTML CONSOLE_CSS CONSOLE_JS)
  string(FIND "${${text}}" ")q0nsole\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "a console file holds the raw-string delimiter )q0nsole\"")
  endif()
endforeach()
configure_file(${CMAKE_SOURCE_DIR}/server/console_assets.h.in
               ${QUEEN_GENERATED_DIR}/server/console_assets.h @ONLY)
