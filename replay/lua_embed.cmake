# lua_embed.cmake: turns a Lua file into a C header holding its text (cmake -DIN=... -DOUT=... -DNAME=... -P).
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}.tmp" "/* generated from ${IN}: do not edit */\nstatic const char ${NAME}[] = {${bytes} 0x00};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
