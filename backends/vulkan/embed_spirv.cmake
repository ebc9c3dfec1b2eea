# cmake -DINPUT=x.spv -DOUTPUT=x.c -DNAME=x -P embed_spirv.cmake: writes the SPIR-V module as a C
# array of 32-bit words (little-endian, as glslangValidator writes them), tf_vk_spirv_<NAME>, and its
# size in bytes, tf_vk_spirv_<NAME>_bytes.
file(READ ${INPUT} hex HEX)
string(LENGTH "${hex}" length)
math(EXPR remainder "${length} % 8")
if(NOT remainder EQUAL 0 OR length EQUAL 0)
  message(FATAL_ERROR "${INPUT} is not a whole number of 32-bit words")
endif()
math(EXPR bytes "${length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])"
       "0x\\4\\3\\2\\1u," words "${hex}")
string(REGEX REPLACE "(0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,)"
       "\\1\n  " words "${words}")
file(WRITE ${OUTPUT}
     "/* Generated from ${NAME}.spv by backends/vulkan/embed_spirv.cmake; do not edit. */\n"
     "#include <stddef.h>\n#include <stdint.h>\n\n"
     "const uint32_t tf_vk_spirv_${NAME}[] = {\n  ${words}\n};\n"
     "const size_t tf_vk_spirv_${NAME}_bytes = ${bytes};\n")
