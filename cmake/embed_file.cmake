# trainc_embed_file(INPUT OUTPUT SYMBOL): writes a header defining `inline constexpr const char SYMBOL[]`
# with the contents of INPUT, regenerated whenever INPUT changes.
function(trainc_embed_file input output symbol)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${input})
  file(READ ${input} TRAINC_EMBEDDED_TEXT)
  get_filename_component(name ${input} NAME)
  file(CONFIGURE OUTPUT ${output} CONTENT
"// Generated from ${name} by cmake/embed_file.cmake; edit the source file instead.
#pragma once
namespace trainc {
inline constexpr const char ${symbol}[] = R\"trainc_embed(@TRAINC_EMBEDDED_TEXT@)trainc_embed\";
}  // namespace trainc
" @ONLY)
endfunction()
