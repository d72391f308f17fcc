# What a new user reads about capacity: the capacity used in both units (24GB and 24GiB differ by
# 1.6 GiB) in the header and as bytes in --json; a device profile's usable memory is the card less
# its CUDA context (--capacity stays as given); bfc's memory_limit is the capacity when there is
# no device; a bare memory_limit number is refused, asking for a unit.
. "$TESTS_DIR/cli/lib.sh"

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
expect 0 replay sample --allocator cuda --capacity 24GB --no-save
has "$T/out" "capacity            22.35 GiB (24.00 GB), as given"
expect 0 replay sample --allocator cuda --capacity 24GiB --no-save
has "$T/out" "capacity            24.00 GiB (25.77 GB), as given"
expect 0 replay sample --allocator cuda --capacity 24GB --no-save --json
[ "$(json_get capacity_bytes)" = 24000000000 ] || fail "capacity_bytes: $(json_get capacity_bytes)"
[ "$(json_get capacity_source)" = option ] || fail "capacity_source: $(json_get capacity_source)"
expect 0 replay sample --allocator cuda --no-save
has "$T/out" "capacity            unlimited"

# a device: the card less its context; the profile shows both
expect 0 replay sample --device A100-80GB --no-save --json
[ "$(json_get capacity_bytes)" = $((85100068864 - 287047680)) ] || fail "device capacity: $(json_get capacity_bytes)"
[ "$(json_get card_bytes)" = 85100068864 ] || fail "card_bytes: $(json_get card_bytes)"
[ "$(json_get context_bytes)" = 287047680 ] || fail "context_bytes: $(json_get context_bytes)"
expect 0 replay sample --device A100-80GB --no-save
has "$T/out" "capacity            78.99 GiB (84.81 GB): A100-80GB's 79.26 GiB less 273.75 MiB for the CUDA context"
expect 0 replay sample --device A100-80GB --capacity 24GB --no-save --json
[ "$(json_get capacity_bytes)" = 24000000000 ] || fail "--capacity with --device not as given: $(json_get capacity_bytes)"
expect 0 devices A100-80GB
has "$T/out" "total_memory     79.26 GiB"
has "$T/out" "context_bytes    273.75 MiB"
has "$T/out" "usable memory    78.99 GiB"
expect 0 devices A100-80GB --json
grep -q '"context_bytes":287047680' "$T/out" || fail "devices --json lacks context_bytes"
grep -q '"usable_memory":84813021184' "$T/out" || fail "devices --json lacks usable_memory"
# a profile's context is the user's to set, and stays below its memory
expect 0 devices Mine --from A100-80GB --set context_bytes=1GiB
expect 0 replay sample --device Mine --no-save --json
[ "$(json_get capacity_bytes)" = $((85100068864 - 1073741824)) ] || fail "own context: $(json_get capacity_bytes)"
expect 1 devices Mine --set context_bytes=100GiB
has "$T/err" "context_bytes"

# bfc: memory_limit is the capacity when there is no device, and says so
expect 3 replay sample --allocator bfc:memory_limit=10GiB --no-save
has "$T/out" "capacity            10.00 GiB (10.74 GB): the allocator's memory_limit"
grep -q "capacity unlimited" "$T/out" && fail "memory_limit run says unlimited"
expect 3 replay sample --allocator bfc:memory_limit=10GiB --no-save --json
[ "$(json_get capacity_source)" = memory_limit ] || fail "capacity_source: $(json_get capacity_source)"
# a bare number: TensorFlow reads MiB, memplay sizes read bytes; refused with a unit asked for
expect 1 replay sample --allocator bfc:memory_limit=10240 --no-save
has "$T/err" "wants a unit: '10240' is MiB to TensorFlow"
has "$T/err" "10240MiB"
expect 3 replay sample --allocator bfc:memory_limit=10240MiB --no-save --json
[ "$(json_get capacity_bytes)" = 10737418240 ] || fail "10240MiB: $(json_get capacity_bytes)"
finish
