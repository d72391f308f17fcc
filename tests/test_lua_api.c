/* test_lua_api.c: every function of the memplay Lua library, and finishing a run (runs, files, rollback). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "gen/gen.h"
#include "lua/lua_host.h"
#include "lua/lua_api.h"
#include "test.h"

int test_failures;

static char tmpdir[] = "/tmp/memplay-test-luaapi-XXXXXX";
static char dbpath[600];
static int64_t trace_id;

static int64_t count_rows(store *s, const char *sql) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(store_db(s), sql, -1, &q, NULL) != SQLITE_OK) return -1;
  int64_t n = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
  sqlite3_finalize(q);
  return n;
}

/* A run: a context over the store, a host, a chunk of Lua. */
typedef struct run {
  store *s;
  lua_ctx cx;
  lua_host *h;
  lua_host_status st;
  lua_param params[4];
} run;

static void run_start(run *r, int whatif, const char *out_dir) {
  char err[STORE_ERRLEN];
  CHECK_EQ(store_open(&r->s, dbpath, 0, err, sizeof err), 0);
  lua_ctx_init(&r->cx);
  r->cx.st = r->s;
  r->cx.script = "test.lua";
  r->cx.scenario = "test";
  r->cx.trace_id = trace_id;
  r->cx.whatif = whatif;
  r->cx.out_dir = out_dir;
  r->cx.out = stderr;
  lua_host_limits lim = {64u << 20, 0, 0};
  r->h = lua_api_host(&r->cx, &lim, err, sizeof err);
  if (!r->h) fprintf(stderr, "host: %s\n", err);
}

static lua_host_status run_code(run *r, const char *code) {
  r->st = lua_host_run_string(r->h, "=test.lua", code, strlen(code));
  if (r->st != LUA_HOST_OK) fprintf(stderr, "--- %s\n", lua_host_error(r->h));
  return r->st;
}

static void run_end(run *r) {
  lua_host_free(r->h);
  lua_ctx_release(&r->cx);
  store_close(r->s);
}

/* Runs code that must succeed (its own asserts check the API). */
static void ok(const char *code) {
  run r;
  run_start(&r, 1, NULL);
  CHECK_EQ(run_code(&r, code), LUA_HOST_OK);
  lua_api_abort(&r.cx);
  run_end(&r);
}

/* Runs code that must fail with a message that contains want and names the line. */
static void fails(const char *code, const char *want) {
  run r;
  run_start(&r, 1, NULL);
  lua_host_status st = lua_host_run_string(r.h, "=test.lua", code, strlen(code));
  CHECK(st != LUA_HOST_OK);
  const char *msg = lua_host_error(r.h);
  if (!strstr(msg, want) || !strstr(msg, "test.lua:")) {
    fprintf(stderr, "expected an error with '%s' and 'test.lua:', got: %s\n", want, msg);
    test_failures++;
  }
  lua_api_abort(&r.cx);
  run_end(&r);
}

static void test_stores_and_traces(void) {
  ok("local t = memplay.trace()\n"
     "assert(t:name() == 'gen')\n"
     "local s = memplay.store()\n"
     "local list = s:traces()\n"
     "assert(#list == 1 and list[1].name == 'gen' and list[1].event_count == 20000)\n"
     "assert(s:trace('gen'):name() == 'gen' and s:trace(list[1].id):name() == 'gen')\n"
     "assert(s:path():find('api.db'))\n"
     "local i = t:info()\n"
     "assert(i.source_format == 'generated' and i.derived == false and #i.transforms == 0)\n"
     "assert(tostring(t):find('memplay.trace'))\n");
  fails("local s = memplay.store()\nlocal t = s:trace('missing')\n", "no trace 'missing'");
  fails("local s = memplay.open('/nonexistent.db')", "cannot open store");
  ok("local o = memplay.open(memplay.store():path())\nassert(#o:traces() == 1)\n");
}

static void test_events_and_summary(void) {
  ok("local t = memplay.trace()\n"
     "local s = t:summary()\n"
     "assert(s.events == 20000 and s.allocs > 0 and s.allocs == s.by_kind.alloc)\n"
     "assert(s.live_peak_bytes > 0 and s.max_size >= s.min_size and s.steps >= 1)\n"
     "assert(s.by_category.parameter.allocs > 0 and s.categorized_allocs == s.allocs)\n"
     "assert(#s.streams >= 1 and s.kernel_time_s > 0)\n"
     "local n, bytes = 0, 0\n"
     "for ev in t:events{kind = 'alloc', category = 'parameter'} do\n"
     "  assert(ev.kind == 'alloc' and ev.category == 'parameter' and ev.size > 0)\n"
     "  n = n + 1; bytes = bytes + ev.size\n"
     "end\n"
     "local cn, cb = t:count{kind = 'alloc', category = 'parameter'}\n"
     "assert(n == cn and bytes == cb and n == s.by_category.parameter.allocs)\n"
     "local k = 0\n"
     "for ev in t:events{kind = 'kernel', class = 'matmul'} do assert(memplay.kernel_class(ev.name) == 'matmul'); k = k + 1 end\n"
     "assert(k > 0)\n"
     /* a kernel's name is the same however it is read: events() again, a cached copy, a map */
     "local names, distinct, again = {}, 0, 0\n"
     "for ev in t:events{kind = 'kernel'} do\n"
     "  if not names[ev.name] then names[ev.name] = true; distinct = distinct + 1 end\n"
     "  names[ev.seq] = ev.name\n"
     "end\n"
     "assert(distinct >= 4)\n"
     "for ev in t:events{kind = 'kernel'} do assert(names[ev.seq] == ev.name); again = again + 1 end\n"
     "local c = t:cache()\n"
     "for ev in c:events{kind = 'kernel'} do assert(names[ev.seq] == ev.name) end\n"
     "local mapped = 0\n"
     "c:map(function(ev) assert(names[ev.seq] == ev.name); mapped = mapped + 1 end, {kind = 'kernel'}):replay{}\n"
     "assert(mapped == again and again > 0)\n"
     "for ev in t:events{kind = 'marker', flags = {'step_begin'}} do assert(ev.flags & memplay.flags.step_begin ~= 0) end\n"
     "for ev in t:events{step = {1, 1}, size = {min = 1 << 20}} do assert(ev.step == 1 and ev.size >= 1 << 20) end\n"
     "for ev in t:events() do break end\n" /* closing a loop early */
     "local a = t:allocations{category = 'activation'}\n"
     "assert(a.n > 0 and #a.seq == a.n and #a.size == a.n and a.category[1] == 'activation')\n"
     "for i = 1, a.n do assert(a.free_seq[i] == -1 or a.free_seq[i] > a.seq[i]) end\n"
     "local k = 1\n"
     "for ev in t:events{kind = 'alloc', category = 'activation'} do\n"
     "  assert(a.seq[k] == ev.seq and a.addr[k] == ev.addr); k = k + 1\n"
     "end\n"
     "assert(k == a.n + 1 and #a.addr == a.n)\n"
     "local sites = t:sites()\n"
     "assert(#sites > 1 and sites[1].bytes >= sites[2].bytes and sites[1].label ~= '')\n"
     "local fr = t:frames(sites[1].site)\n"
     "assert(#fr >= 1 and fr[1].name)\n"
     "assert(t:site_label(sites[1].site) == sites[1].label)\n"
     "local only = t:sites{site_match = 'Adam'}\n"
     "assert(#only >= 1 and #only < #sites)\n"
     "local st = t:steps()\n"
     "assert(#st >= 2 and st[1].first_seq <= st[1].last_seq and st[2].step == st[1].step + 1)\n"
     "local ks = t:kernels()\n"
     "assert(#ks > 1 and ks[1].count > 0 and ks[1].class)\n"
     "local lt = t:lifetimes()\n"
     "assert(lt.persistent_allocs > 0 and lt.transient_allocs > 0)\n"
     "assert(lt.persistent_allocs + lt.transient_allocs == s.allocs)\n");
  /* a seq range of a cached trace is read from its first event: the same events as uncached,
   * also for a cached derived trace (its inserted events carry seqs of their own) */
  ok("local t = memplay.trace()\n"
     "local function seqs(tr, f) local l = {}; for ev in tr:events(f) do l[#l + 1] = ev.seq end; return l end\n"
     "local function same(x, y, f)\n"
     "  local a, b = seqs(x, f), seqs(y, f)\n"
     "  assert(#a == #b, #a .. ' against ' .. #b)\n"
     "  for i = 1, #a do assert(a[i] == b[i]) end\n"
     "  return a\n"
     "end\n"
     "local c = t:cache()\n"
     "local d = t:insert_at{after = {[150] = {{kind = 'alloc', addr = memplay.fresh_addr(1), size = 512}}}}\n"
     "local dc = d:cache()\n"
     "for _, r in ipairs{{100, 250}, {-5, 3}, {19990, 30000}, {500, 500}, {0, 19999}} do\n"
     "  local l = same(t, c, {seq = r})\n"
     "  for _, q in ipairs(l) do assert(q >= r[1] and q <= r[2]) end\n"
     "  same(t, c, {seq = r, kind = 'kernel'})\n"
     "  local n1, b1 = t:count{seq = r, kind = 'alloc'}\n"
     "  local n2, b2 = c:count{seq = r, kind = 'alloc'}\n"
     "  assert(n1 == n2 and b1 == b2)\n"
     "  same(d, dc, {seq = r})\n"
     "end\n"
     "assert(#seqs(c, {seq = {100, 250}}) == 151 and #seqs(c, {seq = {20000, 30000}}) == 0)\n"
     "local all = 0; for _ in dc:events() do all = all + 1 end\n"
     "assert(all == 20001)\n");
  fails("local t = memplay.trace()\nfor ev in t:events{kind = 'allocs'} do end", "unknown value 'allocs'");
  fails("local t = memplay.trace()\nt:count{knd = 'alloc'}", "unknown option 'knd'");
  fails("local t = memplay.trace()\nt:count('alloc')", "expects a table of options");
  fails("local t = memplay.trace()\nt:count{lifetime = 'forever'}", "'persistent' or 'transient'");
  fails("local t = memplay.trace()\nt:count{step = 'x'}", "must be a number or a range");
  fails("local t = memplay.trace()\nt.summary()", "bad argument #1");
}

static void test_transforms(void) {
  ok("local t = memplay.trace()\n"
     "local base = t:replay{}\n"
     "local pb = select(2, t:count{kind = 'alloc', category = 'parameter'})\n"
     "local ab = select(2, t:count{kind = 'alloc', category = 'activation'})\n"
     /* scale: activations double, parameters stay */
     "local t2 = t:scale{category = 'activation', factor = 2}\n"
     "assert(select(2, t2:count{kind = 'alloc', category = 'parameter'}) == pb)\n"
     "assert(select(2, t2:count{kind = 'alloc', category = 'activation'}) == 2 * ab)\n"
     "assert(t2:info().derived and #t2:info().transforms == 1)\n"
     "local r2 = t2:replay{}\n"
     "assert(r2.peak_allocated_bytes > base.peak_allocated_bytes and r2.derived)\n"
     /* elem_size: fp32 -> fp16 halves, aligned to 2 */
     "local h = t:elem_size{category = 'activation', from = 4, to = 2}\n"
     "for ev in h:events{kind = 'alloc', category = 'activation'} do assert(ev.size % 2 == 0) end\n"
     "assert(select(2, h:count{kind = 'alloc', category = 'activation'}) <= ab // 2 + 2 * select(1, t:count{kind = 'alloc', category = 'activation'}))\n"
     /* resize: one allocation */
     "local first\n"
     "for ev in t:events{kind = 'alloc'} do first = ev; break end\n"
     "local rs = t:resize{[first.seq] = 12345}\n"
     "for ev in rs:events{kind = 'alloc'} do assert(ev.size == 12345); break end\n"
     /* drop, drop_steps */
     "local d = t:drop{kind = 'kernel'}\n"
     "assert(d:count{kind = 'kernel'} == 0 and d:count{kind = 'alloc'} == t:count{kind = 'alloc'})\n"
     "local ds = t:drop_steps{1, 1}\n"
     "assert(ds:count{step = 1} == 0)\n"
     /* insert */
     "local ins = t:insert{events = {{kind = 'host_alloc', addr = 1, size = 4096, mem = 'pinned'}}, at = 'start'}\n"
     "local r3 = ins:replay{}\n"
     "assert(r3.host_pinned_peak_bytes >= 4096)\n"
     "local before = t:insert{events = {{kind = 'alloc', addr = 7, size = 1 << 20}, {kind = 'free', addr = 7}}, before = {kind = 'marker', flags = 'step_begin'}}\n"
     "assert(before:count{kind = 'alloc'} == t:count{kind = 'alloc'} + t:count{kind = 'marker', flags = 'step_begin'})\n"
     /* pin: the generator's copies are pinned already: make them pageable, then pin them back */
     "local pg = t:pin{to = 'pageable', mem = 'pinned', async = false}\n"
     "assert(pg:count{kind = 'memcpy', mem = 'pageable'} == t:count{kind = 'memcpy'})\n"
     "local pn = pg:pin{duration_factor = 0.5}\n"
     "assert(pn:count{kind = 'memcpy', mem = 'pinned', flags = 'async'} == t:count{kind = 'memcpy'})\n"
     /* insert_at: free the first activation early, allocate it again later, with a fresh address */
     "local first_act\n"
     "for ev in t:events{kind = 'alloc', category = 'activation'} do first_act = ev; break end\n"
     "local fa = memplay.fresh_addr(1)\n"
     "assert(fa ~= memplay.fresh_addr(2) and fa > 0)\n"
     "local ia = t:insert_at{before = {[first_act.seq] = {{kind = 'alloc', addr = fa, size = 1 << 20}}},\n"
     "                       after = {[first_act.seq] = {{kind = 'free', addr = fa}, {kind = 'kernel', dur = 5}}}}\n"
     "assert(ia:count{kind = 'alloc'} == t:count{kind = 'alloc'} + 1 and ia:count{kind = 'kernel'} == t:count{kind = 'kernel'} + 1)\n"
     "assert(ia:replay{}.skipped.unknown_frees == base.skipped.unknown_frees)\n"
     "assert(ia:describe():find('insert_at'))\n"
     /* scale_time */
     "local kt = t:summary().kernel_time_s\n"
     "local fast = t:scale_time{factor = 0.5}\n"
     "assert(math.abs(fast:summary().kernel_time_s - kt / 2) < 1e-6 * kt + 1e-6)\n"
     "assert(t:count{kind = 'kernel', name = 'no such kernel'} == 0)\n"
     "assert(t:drop{kind = 'kernel', name = 'no such kernel'}:count{kind = 'kernel'} == t:count{kind = 'kernel'})\n"
     "assert(t:drop{site_match = 'no such frame'}:count{} == t:count{})\n"
     "local mm = t:scale_time{class = 'matmul', factor = 0}\n"
     "for ev in mm:events{kind = 'kernel', class = 'matmul'} do assert(ev.dur == 0) end\n"
     /* repeat */
     "local steps = t:steps()\n"
     "local rp = t:repeat_steps{times = 3}\n"
     "assert(rp:count{} > t:count{})\n"
     "local rr = rp:replay{}\n"
     "assert(rr.skipped.unknown_frees == base.skipped.unknown_frees)\n"
     "local rb = t:repeat_block{from = steps[2].first_seq, to = steps[2].last_seq + 1, times = 2, once = {category = 'gradient'}, once_transient = true}\n"
     "assert(rb:count{} > t:count{})\n"
     /* map */
     "local m = t:map(function(ev) ev.size = ev.size * 2 end, {kind = 'alloc', category = 'activation'})\n"
     "assert(select(2, m:count{kind = 'alloc', category = 'activation'}) == 2 * ab)\n"
     "local m2 = t:map(function(ev) if ev.kind == 'kernel' then return false end end)\n"
     "assert(m2:count{kind = 'kernel'} == 0)\n"
     "local m3 = t:map(function(ev) return {ev, {kind = 'marker'}} end, {kind = 'memcpy'})\n"
     "assert(m3:count{kind = 'marker'} == t:count{kind = 'marker'} + t:count{kind = 'memcpy'})\n"
     /* merge: two processes on two devices of one store */
     "local mg = t:merge(t, {device = 1, offset_s = 0.5})\n"
     "assert(mg:count{} == 2 * t:count{})\n"
     "local rm = mg:replay{}\n"
     "assert(#rm.devices == 2)\n"
     /* cache: the same events, from memory */
     "local c = t:cache()\n"
     "assert(c:replay{}.peak_allocated_bytes == base.peak_allocated_bytes)\n"
     "local cs = t2:cache()\n"
     "assert(cs:replay{}.peak_allocated_bytes == r2.peak_allocated_bytes)\n"
     /* chains share their prefix */
     "local chain = t2:drop{kind = 'kernel'}:scale_time{factor = 2}\n"
     "assert(#chain:info().transforms == 3)\n");
  fails("local t = memplay.trace()\nt:scale{category = 'activation'}", "option 'factor' is required");
  fails("local t = memplay.trace()\nt:scale{factor = -2}", "factor must be a number >= 0");
  fails("local t = memplay.trace()\nt:scale{factor = 'two'}", "must be a number, not a string");
  fails("local t = memplay.trace()\nt:elem_size{from = 3.5, to = 2}", "element sizes");
  fails("local t = memplay.trace()\nt:drop{}", "selects every event");
  fails("local t = memplay.trace()\nt:insert{events = {{size = 3}}}", "needs a kind");
  fails("local t = memplay.trace()\nt:insert{events = {{kind = 'alloc', size = 'big'}}}", "size");
  fails("local t = memplay.trace()\nt:repeat_block{from = 10, to = 5, times = 2}", "is empty");
  fails("local t = memplay.trace()\nt:repeat_steps{times = 2.5}", "whole number");
  fails("local t = memplay.trace()\nt:map(42)", "bad argument #1 to 'map'");
  fails("local t = memplay.trace()\nlocal m = t:map(function(ev) error('boom in map') end)\nm:replay{}", "boom in map");
  fails("local t = memplay.trace()\nlocal m = t:map(function(ev) return 42 end)\nm:count{}", "not a number");
  fails("local t = memplay.trace()\nlocal m = t:map(function(ev) ev.size = -1 end, {kind = 'alloc'})\nm:count{}", "size");
}

static void test_replay(void) {
  ok("local t = memplay.trace()\n"
     "local r = t:replay{allocator = 'cuda'}\n"
     "assert(r.allocator == 'cuda' and r.trace == 'gen' and r.events == 20000)\n"
     "assert(r.peak_reserved_bytes >= r.peak_allocated_bytes and r.fits == true and r.ooms == 0)\n"
     "assert(type(r.at_peak.by_category) == 'table' and #r.at_peak.top_sites > 0 and r.at_peak.top_sites[1].site)\n"
     "assert(#r.timeline > 0 and r.timeline[1].allocated_bytes ~= nil)\n"
     "local nr = t:replay{allocator = 'cuda', device = false}\n"
     "assert(nr.step_time_s == nil and nr.time == nil)\n"
     "local tr = t:replay{allocator = 'cuda', device = 'A100-80GB', timing = 'device_waits=drop'}\n"
     "assert(tr.step_time_s > 0 and tr.samples_per_s > 0 and tr.time.breakdown_s.compute > 0 and tr.device == 'A100-80GB')\n"
     "assert(tr.capacity_bytes == memplay.device_memory('A100-80GB'))\n"
     "local slow = t:scale_time{factor = 2}:replay{allocator = 'cuda', device = 'A100-80GB', timing = 'device_waits=drop'}\n"
     "assert(slow.step_time_s > tr.step_time_s)\n"
     "local devs = memplay.devices()\n"
     "assert(#devs > 3 and devs[1].name and devs[1].total_memory > 0)\n"
     "assert(memplay.device_profile('H100').mem_bw > 0)\n"
     "local small = t:replay{allocator = 'cuda', capacity = r.peak_reserved_bytes // 2, stop_at_oom = true}\n"
     "assert(small.fits == false and small.ooms == 1 and small.stopped_at_oom and #small.oom_list == 1)\n"
     "assert(small.capacity_bytes == r.peak_reserved_bytes // 2)\n"
     "local s2 = t:replay{capacity = '1GiB'}\n"
     "assert(s2.capacity_bytes == 1 << 30)\n"
     "local chk = t:replay{check = true, timeline_points = 10, top_sites = 2}\n"
     "assert(#chk.timeline <= 10 and #chk.at_peak.top_sites <= 2)\n"
     "local c = t:cache()\n" /* replayed in place: the same answer as the stored trace's */
     "local a, b = c:replay{allocator = 'torch'}, t:replay{allocator = 'torch'}\n"
     "assert(a.peak_reserved_bytes == b.peak_reserved_bytes and a.events == b.events and a.at_peak.top_sites[1].site == b.at_peak.top_sites[1].site)\n"
     "assert(#t:replay{top_sites = 0}.at_peak.top_sites == 0 and #t:replay{}.at_peak.top_sites == 10)\n"
     "local cc = c:cache()\n" /* a cached trace cached again: copied from the array it lends */
     "assert(cc:count() == t:count() and cc:replay{allocator = 'torch'}.peak_reserved_bytes == b.peak_reserved_bytes)\n"
     /* lean: the same figures, nothing kept at the peak but its totals, no timeline */
     "for _, src in ipairs{t, c} do\n"
     "  local full, lean = src:replay{allocator = 'torch'}, src:replay{allocator = 'torch', lean = true}\n"
     "  assert(lean.lean == true and full.lean == nil and lean.timeline_points == 0)\n"
     "  for _, k in ipairs{'events', 'allocs', 'frees', 'peak_allocated_bytes', 'peak_reserved_bytes', 'peak_active_bytes',\n"
     "                      'fragmentation', 'fragmentation_gmlake', 'device_mallocs', 'ooms', 'final_reserved_bytes'} do\n"
     "    assert(lean[k] == full[k], k)\n"
     "  end\n"
     "  assert(lean.at_peak.reserved_bytes == full.at_peak.reserved_bytes and lean.at_peak.by_category == nil)\n"
     "  assert(lean.at_peak.top_sites == nil and full.at_peak.top_sites[1] ~= nil)\n"
     "end\n");
  fails("local t = memplay.trace()\nlocal r = t:replay{lean = true}\nlocal x = r.timeline",
        "a lean replay's result has no timeline");
  fails("local t = memplay.trace()\nlocal r = t:replay{}\nlocal x = r.peak_allocated", "has no field 'peak_allocated'");
  fails("local t = memplay.trace()\nt:replay{alocator = 'cuda'}", "unknown option 'alocator'");
  fails("local t = memplay.trace()\nt:replay{allocator = 'nope'}", "unknown allocator 'nope'");
  fails("local t = memplay.trace()\nt:replay{capacity = 'lots'}", "must be a size");
  fails("local t = memplay.trace()\nt:replay{device = 'NoSuchGPU'}", "no device profile 'NoSuchGPU'");
  fails("local t = memplay.trace()\nt:replay{timing = 'copies=sometimes'}", "timing");
  fails("local x = memplay.device_memory('NoSuchGPU')", "no device profile");
  fails("local t = memplay.trace()\nt:replay{allocator = 'cuda:bogus=1'}", "bogus");
}

/* Whether JSON values a and b are the same (objects: the same keys, in any order); says where not. */
static int json_empty(yajl_val v) {
  return !v || YAJL_IS_NULL(v) || (YAJL_IS_ARRAY(v) && !v->u.array.len) || (YAJL_IS_OBJECT(v) && !v->u.object.len);
}

/* Lua has no null, and an empty table is written as {}: null, absent, [] and {} count as alike. */
static int json_same(yajl_val a, yajl_val b, const char *at) {
  if (json_empty(a) && json_empty(b)) return 1;
  if (!a || !b || a->type != b->type) {
    fprintf(stderr, "%s: types differ\n", at);
    return 0;
  }
  if (YAJL_IS_NUMBER(a)) {
    if (YAJL_IS_INTEGER(a) != YAJL_IS_INTEGER(b) || (YAJL_IS_INTEGER(a) ? YAJL_GET_INTEGER(a) != YAJL_GET_INTEGER(b)
                                                                        : YAJL_GET_DOUBLE(a) != YAJL_GET_DOUBLE(b))) {
      fprintf(stderr, "%s: %s against %s\n", at, YAJL_GET_NUMBER(a), YAJL_GET_NUMBER(b));
      return 0;
    }
    return 1;
  }
  if (YAJL_IS_STRING(a) && strcmp(a->u.string, b->u.string)) {
    fprintf(stderr, "%s: '%s' against '%s'\n", at, YAJL_GET_STRING(a), YAJL_GET_STRING(b));
    return 0;
  }
  char sub[512];
  if (YAJL_IS_ARRAY(a)) {
    if (a->u.array.len != b->u.array.len) return fprintf(stderr, "%s: lengths differ\n", at), 0;
    for (size_t i = 0; i < a->u.array.len; i++) {
      snprintf(sub, sizeof sub, "%s[%zu]", at, i);
      if (!json_same(a->u.array.values[i], b->u.array.values[i], sub)) return 0;
    }
  }
  if (YAJL_IS_OBJECT(a)) {
    for (size_t i = 0; i < b->u.object.len; i++) {
      const char *path[] = {b->u.object.keys[i], NULL};
      if (!json_empty(b->u.object.values[i]) && !yajl_tree_get(a, path, yajl_t_any))
        return fprintf(stderr, "%s: '%s' on one side only\n", at, b->u.object.keys[i]), 0;
    }
    for (size_t i = 0; i < a->u.object.len; i++) {
      const char *path[] = {a->u.object.keys[i], NULL};
      snprintf(sub, sizeof sub, "%s.%s", at, a->u.object.keys[i]);
      if (!json_same(a->u.object.values[i], yajl_tree_get(b, path, yajl_t_any), sub)) return 0;
    }
  }
  return 1;
}

/* A result table has what the result's JSON (`replay --json`, a variant of `--json`) has, key for
 * key and value for value, the keys built on first read included: each replay below is recorded
 * as a variant (whose JSON report.c writes) and as memplay.json of its table (the script's J).
 * samples_per_s is the variant's own (memplay.variant's batch), not compared. */
static void test_result_table_as_json(void) {
  char err[512];
  run r;
  run_start(&r, 0, NULL);
  CHECK_EQ(run_code(&r, "local t = memplay.trace()\n"
                        "local c = t:cache()\n"
                        "J = {}\n"
                        "local function rec(name, res) memplay.variant(name, res); J[#J + 1] = memplay.json(res) end\n"
                        "rec('plain', t:replay{allocator = 'cuda'})\n"
                        "rec('cached', c:replay{allocator = 'torch'})\n"
                        "local timed = c:replay{allocator = 'torch', device = 'A100-80GB', timing = 'device_waits=drop'}\n"
                        "assert(rawget(timed, 'time') == nil and timed.time.breakdown_s and rawget(timed, 'time'))\n"
                        "rec('timed', timed)\n"
                        "local big = t:replay{allocator = 'cuda'}.peak_reserved_bytes\n"
                        "rec('oom', c:scale{factor = 2}:replay{allocator = 'torch', capacity = big, max_ooms = 3})\n"
                        "local none = c:replay{allocator = 'cuda', top_sites = 0}\n"
                        "assert(#none.at_peak.top_sites == 0 and none.peak_allocated_bytes > 0)\n"
                        "rec('no_sites', none)\n"
                        "rec('lean', c:replay{allocator = 'torch', lean = true})\n"
                        "local keys = {}\n"
                        "for k in pairs(c:replay{allocator = 'bfc'}) do keys[k] = true end\n"
                        "assert(keys.at_peak and keys.oom_list and keys.devices and not keys.timeline)\n"),
           LUA_HOST_OK);
  lua_State *L = lua_host_state(r.h);
  lua_getglobal(L, "J");
  size_t nj = lua_rawlen(L, -1);
  char **lua_json = calloc(nj + 1, sizeof *lua_json);
  for (size_t i = 0; i < nj; i++) {
    lua_rawgeti(L, -1, (lua_Integer)i + 1);
    lua_json[i] = strdup(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  CHECK_EQ(lua_api_finish(&r.cx, r.h, err, sizeof err), 0);
  FILE *tmp = tmpfile();
  lua_api_print_json(&r.cx, tmp);
  long n = ftell(tmp);
  rewind(tmp);
  char *text = calloc((size_t)n + 1, 1);
  CHECK_EQ(fread(text, 1, (size_t)n, tmp), (size_t)n);
  fclose(tmp);
  yajl_val all = yajl_tree_parse(text, err, sizeof err);
  const char *vpath[] = {"variants", NULL};
  yajl_val vs = all ? yajl_tree_get(all, vpath, yajl_t_array) : NULL;
  CHECK(vs && vs->u.array.len == nj && nj == 6);
  for (size_t i = 0; vs && i < vs->u.array.len && i < nj; i++) {
    yajl_val v = vs->u.array.values[i], lv = yajl_tree_parse(lua_json[i], err, sizeof err);
    CHECK(lv != NULL);
    /* the variant's own keys, and the keys only a table has, are left out of the comparison */
    for (size_t k = 0; lv && k < v->u.object.len; k++) {
      const char *key = v->u.object.keys[k];
      if (!strcmp(key, "name") || !strcmp(key, "run_id") || !strcmp(key, "samples_per_s")) continue;
      const char *path[] = {key, NULL};
      char at[128];
      snprintf(at, sizeof at, "variant %zu: %s", i, key);
      CHECK(json_same(v->u.object.values[k], yajl_tree_get(lv, path, yajl_t_any), at));
    }
    for (size_t k = 0; lv && k < lv->u.object.len; k++) {
      const char *key = lv->u.object.keys[k], *path[] = {key, NULL};
      if (strcmp(key, "fits") && strcmp(key, "derived") && strcmp(key, "samples_per_s") && !yajl_tree_get(v, path, yajl_t_any)) {
        fprintf(stderr, "variant %zu: the table has '%s', the JSON has not\n", i, key);
        test_failures++;
      }
    }
    yajl_tree_free(lv);
    free(lua_json[i]);
  }
  yajl_tree_free(all);
  free(text);
  free(lua_json);
  run_end(&r);
}

static void test_helpers(void) {
  ok("assert(memplay.bytes(1536) == '1.50 KiB' and memplay.bytes(100) == '100 B')\n"
     "assert(memplay.duration(0.0025) == '2.500 ms' and memplay.duration(2) == '2.000 s')\n"
     "assert(memplay.parse_size('24GB') == 24 * 1000 ^ 3 and memplay.parse_size('1GiB') == 1 << 30)\n"
     "assert(memplay.parse_size('lots') == nil)\n"
     "assert(memplay.kernel_class('ampere_sgemm_128x64_tn') == 'matmul')\n"
     "assert(#memplay.kernel_classes() >= 8)\n"
     "assert(memplay.lower_bound({1, 3, 3, 7}, 3) == 2 and memplay.lower_bound({1, 3, 3, 7}, 4) == 4)\n"
     "assert(memplay.lower_bound({1, 3}, 0) == 1 and memplay.lower_bound({1, 3}, 9) == 3)\n"
     "assert(memplay.lower_bound({}, 1) == 1 and memplay.lower_bound({1.5, 2.5}, 2) == 2)\n"
     "assert(table.concat(memplay.order({30, 10, 20, 10, -5}), ',') == '5,2,4,3,1')\n" /* equal keys in list order */
     "assert(table.concat(memplay.order({2.5, 1, 3, 1.5}), ',') == '2,4,1,3' and #memplay.order({}) == 0)\n"
     "assert(table.concat(memplay.order({math.maxinteger, math.mininteger, 0}), ',') == '2,3,1')\n"
     "local big, want = {}, {}\n"
     "for i = 1, 5000 do big[i] = (i * 7919) % 5003 end\n"
     "for i = 1, 5000 do want[i] = i end\n"
     "table.sort(want, function(x, y) return big[x] < big[y] end)\n"
     "local got = memplay.order(big)\n"
     "for i = 1, 5000 do assert(got[i] == want[i]) end\n"
     "local names = {}\n"
     "for _, a in ipairs(memplay.allocators()) do names[a.name] = a end\n"
     "assert(names.ideal and names.cuda and names.ideal.summary)\n"
     "assert(memplay.flags.step_begin == 1 and memplay.kinds[1] == 'alloc' and memplay.categories[5] == 'activation')\n"
     "assert(memplay.version and memplay.scenario() == 'test')\n"
     "local txt = memplay.format_table({{a = 'x', b = 1536}, {a = 'yy', b = 10}}, {'a', {key = 'b', title = 'B', format = 'bytes'}})\n"
     "assert(txt:find('1.50 KiB') and txt:find('^a ') and txt:find('\\n%-%-'))\n"
     "memplay.print_table({{a = 1}})\n"
     "local rows = memplay.sweep({1, 2, 3}, function(v) return {sq = v * v} end)\n"
     "assert(#rows == 3 and rows[3].sq == 9 and rows[3].value == 3)\n"
     "local best, probes = memplay.search{lo = 1, hi = 1000, test = function(x) return x * x <= 5000 end}\n"
     "assert(best == 70 and #probes < 25)\n"
     "assert(memplay.search{lo = 10, hi = 20, test = function(x) return false end} == nil)\n"
     "local b2 = memplay.search{lo = 1, hi = 100, start = 64, test = function(x) return x <= 64 end}\n"
     "assert(b2 == 64)\n"
     "assert(memplay.json({a = {1, 2}, b = true}) == '{\"a\":[1,2],\"b\":true}')\n"
     "memplay.assume('the test assumes nothing')\n"
     "assert(memplay.assumptions()[1] == 'the test assumes nothing')\n"
     "assert(memplay.device() == nil)\n"
     "memplay.write_out('written ', 1, '\\n')\n");
  /* the scenario kit */
  ok("local S = memplay.scenario_context()\n"
     "assert(S.trace:name() == 'gen' and S.allocator and S.batch == 8)\n"
     "local r = S:replay(S.trace)\n"
     "local row = S:record('recorded', r)\n"
     "assert(row.peak_allocated == r.peak_allocated_bytes and row.variant == 'recorded')\n"
     "local d = S.trace:scale(memplay.activation_filter{factor = 2})\n"
     "assert(d:count{kind = 'alloc'} == S.trace:count{kind = 'alloc'})\n"
     "S:record('doubled', S:replay(d), {batch = 16, extra = 1})\n"
     "S:report{title = 'kit', columns = {{key = 'extra', title = 'extra'}}}\n"
     "assert(#memplay.variants() == 2)\n");
  fails("memplay.print_table(42)", "rows must be a table");
  fails("memplay.search{lo = 5, hi = 1, test = print}", "lo <= hi");
  fails("memplay.json({[{}] = 1})", "keys must be strings");
  fails("local t = {}\nt.t = t\nmemplay.json(t)", "nested too deeply");
  fails("memplay.bytes('x')", "bad argument #1 to 'bytes'");
  fails("memplay.lower_bound({1, 'x', 3}, 2)", "element 2 of the list is not a number");
  fails("memplay.lower_bound(5, 2)", "bad argument #1 to 'lower_bound'");
  fails("memplay.order({1, 'x', 3})", "element 2 of the list is not a number");
  fails("memplay.order({1, 0/0})", "element 2 of the list is NaN");
  fails("memplay.order('x')", "bad argument #1 to 'order'");
}

static void test_params(void) {
  run r;
  run_start(&r, 0, NULL);
  r.params[0] = (lua_param){"batch", "32", 0};
  r.params[1] = (lua_param){"ratio", "0.5", 0};
  r.params[2] = (lua_param){"fast", "yes", 0};
  r.params[3] = (lua_param){"cap", "24GiB", 0};
  r.cx.params = r.params;
  r.cx.nparams = 4;
  CHECK_EQ(run_code(&r, "assert(memplay.param('batch', 8) == 32 and math.type(memplay.param('batch', 8)) == 'integer')\n"
                        "assert(memplay.param('ratio', 1.0) == 0.5)\n"
                        "assert(memplay.param('fast', false) == true)\n"
                        "assert(memplay.size_param('cap', '1GiB') == 24 << 30)\n"
                        "assert(memplay.param('absent', 'dflt') == 'dflt')\n"
                        "assert(memplay.size_param('absent2', 4096) == 4096)\n"
                        "assert(memplay.params().batch == '32')\n"),
           LUA_HOST_OK);
  char err[512];
  CHECK_EQ(lua_api_finish(&r.cx, r.h, err, sizeof err), 0);
  run_end(&r);

  static const struct {
    const char *key, *value, *code, *want;
  } bad[] = {
    {"batch", "abc", "local b = memplay.param('batch', 8)", "--set batch=abc: an integer is expected"},
    {"batch", "2.5", "local b = memplay.param('batch', 8)", "an integer is expected"},
    {"ratio", "half", "local b = memplay.param('ratio', 0.5)", "a number is expected"},
    {"fast", "maybe", "local b = memplay.param('fast', true)", "true or false is expected"},
    {"cap", "huge", "local b = memplay.size_param('cap', 1)", "a size such as"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    run_start(&r, 0, NULL);
    r.params[0] = (lua_param){bad[i].key, bad[i].value, 0};
    r.cx.params = r.params;
    r.cx.nparams = 1;
    CHECK_EQ(lua_host_run_string(r.h, "=test.lua", bad[i].code, strlen(bad[i].code)), LUA_HOST_ERUN);
    if (!strstr(lua_host_error(r.h), bad[i].want) || !strstr(lua_host_error(r.h), "test.lua:1:")) {
      fprintf(stderr, "expected '%s' at test.lua:1, got %s\n", bad[i].want, lua_host_error(r.h));
      test_failures++;
    }
    run_end(&r);
  }
  /* a --set the script never reads is an error at the end */
  run_start(&r, 0, NULL);
  r.params[0] = (lua_param){"bacth", "3", 0};
  r.cx.params = r.params;
  r.cx.nparams = 1;
  CHECK_EQ(run_code(&r, "local b = memplay.param('batch', 8)"), LUA_HOST_OK);
  CHECK_EQ(lua_api_finish(&r.cx, r.h, err, sizeof err), -1);
  CHECK(strstr(err, "'bacth' is not a parameter") != NULL);
  run_end(&r);
}

static void test_finish(void) {
  char err[512], outdir[700];
  snprintf(outdir, sizeof outdir, "%s/out", tmpdir);
  run r;
  /* a whatif: variants stored as runs, files written, a saved trace kept */
  run_start(&r, 1, outdir);
  int64_t runs0 = count_rows(r.s, "SELECT count(*) FROM runs");
  CHECK_EQ(run_code(&r, "local t = memplay.trace()\n"
                        "local a = t:replay{}\n"
                        "local b = t:scale{category = 'activation', factor = 2}:replay{}\n"
                        "memplay.variant('baseline', a)\n"
                        "memplay.variant('double', b, {batch = 8, step_time_s = 0.5})\n"
                        "assert(#memplay.variants() == 2)\n"
                        "memplay.write_csv('rows.csv', {{name = 'a', peak = a.peak_allocated_bytes}, {name = 'b,c', peak = 1.5}}, {'name', 'peak'})\n"
                        "memplay.write_json('result.json', {a = a.peak_allocated_bytes})\n"
                        "memplay.write_text('notes.txt', 'hello')\n"
                        "local s = t:scale{category = 'activation', factor = 2}:save('gen-double')\n"
                        "assert(s:name() == 'gen-double' and s:info().source_format == 'derived')\n"
                        "assert(s:replay{}.peak_allocated_bytes == b.peak_allocated_bytes)\n"),
           LUA_HOST_OK);
  CHECK_EQ(lua_api_finish(&r.cx, r.h, err, sizeof err), 0);
  CHECK_EQ(count_rows(r.s, "SELECT count(*) FROM runs") - runs0, 2);
  CHECK_EQ(count_rows(r.s, "SELECT count(*) FROM runs WHERE kind = 'whatif' AND scenario = 'test' AND variant = 'double' "
                           "AND samples_per_s = 16.0 AND step_time_s = 0.5"),
           1);
  CHECK_EQ(count_rows(r.s, "SELECT count(*) FROM traces WHERE name = 'gen-double' AND source_format = 'derived'"), 1);
  FILE *tmp = tmpfile();
  lua_api_print_json(&r.cx, tmp);
  rewind(tmp);
  static char json[1 << 20];
  size_t jn = fread(json, 1, sizeof json - 1, tmp);
  json[jn] = 0;
  fclose(tmp);
  CHECK(strstr(json, "{\"scenario\":\"test\"") == json);
  CHECK(strstr(json, "\"variants\":[{\"name\":\"baseline\",\"trace\":\"gen\"") != NULL);
  CHECK(strstr(json, "\"name\":\"double\"") != NULL);
  CHECK(strstr(json, "\"samples_per_s\":16.0") != NULL);
  CHECK(strstr(json, "\"run_id\":") != NULL);
  run_end(&r);
  char path[800], buf[256];
  snprintf(path, sizeof path, "%s/rows.csv", outdir);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  if (f) {
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    CHECK(strncmp(buf, "name,peak\na,", 12) == 0);
    CHECK(strstr(buf, "\"b,c\",1.5\n") != NULL);
  }
  snprintf(path, sizeof path, "%s/notes.txt", outdir);
  CHECK(access(path, F_OK) == 0);
  snprintf(path, sizeof path, "%s/result.json", outdir);
  CHECK(access(path, F_OK) == 0);

  /* a failing script leaves the store and the folder as they were */
  run_start(&r, 1, outdir);
  int64_t runs1 = count_rows(r.s, "SELECT count(*) FROM runs"), traces1 = count_rows(r.s, "SELECT count(*) FROM traces");
  CHECK(run_code(&r, "local t = memplay.trace()\n"
                     "memplay.variant('baseline', t:replay{})\n"
                     "t:scale{category = 'activation', factor = 3}:save('gen-triple')\n"
                     "memplay.write_text('late.txt', 'x')\n"
                     "error('fails after writing')\n") == LUA_HOST_ERUN);
  lua_api_abort(&r.cx);
  CHECK_EQ(count_rows(r.s, "SELECT count(*) FROM runs"), runs1);
  CHECK_EQ(count_rows(r.s, "SELECT count(*) FROM traces"), traces1);
  run_end(&r);
  snprintf(path, sizeof path, "%s/late.txt", outdir);
  CHECK(access(path, F_OK) != 0);

  /* the rules of a scenario */
  run_start(&r, 1, NULL);
  CHECK_EQ(run_code(&r, "local x = 1"), LUA_HOST_OK);
  CHECK_EQ(lua_api_finish(&r.cx, r.h, err, sizeof err), -1);
  CHECK(strstr(err, "recorded no variants") != NULL);
  run_end(&r);
  fails("local t = memplay.trace()\nmemplay.variant('first', t:scale{factor = 2}:replay{})", "must replay the unchanged trace");
  fails("local t = memplay.trace()\nlocal r = t:replay{}\nmemplay.variant('a', r)\nmemplay.variant('a', r)", "recorded twice");
  fails("memplay.variant('a', {})", "a result of trace:replay()");
  fails("memplay.write_text('../escape.txt', 'x')", "no folders");
  fails("memplay.write_text('a.txt', 'x')\nmemplay.write_text('a.txt', 'y')", "written twice");
  fails("local t = memplay.trace()\nt:save('gen')", "exists already");
  run_start(&r, 0, NULL);
  CHECK_EQ(run_code(&r, "memplay.write_text('a.txt', 'x')"), LUA_HOST_OK);
  CHECK_EQ(lua_api_finish(&r.cx, r.h, err, sizeof err), -1);
  CHECK(strstr(err, "--out DIR") != NULL);
  run_end(&r);
}

static void test_memory_budget_in_callbacks(void) {
  /* a runaway per-event function is stopped by the budget, the C side cleans up */
  run r;
  run_start(&r, 1, NULL);
  lua_host_status st = lua_host_run_string(r.h, "=test.lua",
                                           "local keep = {}\n"
                                           "local t = memplay.trace():map(function(ev) keep[#keep + 1] = ('x'):rep(4096) end)\n"
                                           "t:replay{}\n",
                                           strlen("local keep = {}\n"
                                                  "local t = memplay.trace():map(function(ev) keep[#keep + 1] = ('x'):rep(4096) end)\n"
                                                  "t:replay{}\n"));
  CHECK_EQ(st, LUA_HOST_EMEMORY);
  CHECK(strstr(lua_host_error(r.h), "memory budget") != NULL);
  CHECK(strstr(lua_host_error(r.h), "test.lua:") != NULL);
  run_end(&r);
}

int main(void) {
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  snprintf(dbpath, sizeof dbpath, "%s/api.db", tmpdir);
  store *s;
  char err[STORE_ERRLEN];
  if (store_open(&s, dbpath, STORE_CREATE, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  gen_config cfg = {.events = 20000, .seed = 3, .batch = 8};
  store_begin(s);
  if (gen_write(s, &cfg, "gen", &trace_id, err, sizeof err) || store_commit(s)) {
    fprintf(stderr, "gen: %s\n", err);
    return 1;
  }
  store_close(s);
  RUN(test_stores_and_traces);
  RUN(test_events_and_summary);
  RUN(test_transforms);
  RUN(test_replay);
  RUN(test_result_table_as_json);
  RUN(test_helpers);
  RUN(test_params);
  RUN(test_finish);
  RUN(test_memory_budget_in_callbacks);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdir);
  TEST_MAIN_END();
}
