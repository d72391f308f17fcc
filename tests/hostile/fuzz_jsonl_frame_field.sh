# Found by fuzz_jsonl: a stack frame with an unknown field was reported after the parsed frames
# (which hold the field's name) were freed: a use after free. Now a clean error naming the field.
. "$TESTS_DIR/cli/lib.sh"
expect 1 import "$MEMPLAY_SRC/tests/fuzz/seeds/jsonl/regress_frame_field_uaf.jsonl" &&
  has "$T/err" "regress_frame_field_uaf.jsonl:2: frame 0 of a stack has an unknown or mistyped field 'namg'"
finish
