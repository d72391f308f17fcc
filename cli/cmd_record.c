/* cmd_record.c: `memplay record -- COMMAND`: run a CUDA program under the recorder and import its trace. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/*
 * Exit status (documented in docs/gpu.md): before the program runs, memplay's own (1 failure,
 * 2 usage); once it has run, the program's own status (128+N when signal N ended it), unless
 * the program succeeded and its trace could not be recorded or imported: then 1.
 */

static const char *const record_usage[] = {
  "memplay record [--name NAME] [--output FILE] [--recorder LIB] [--db FILE] [--json] -- COMMAND [ARGS...]",
  "  --name NAME       name of the new trace (default: the command's name)",
  "  --output FILE     also keep the recorded JSON Lines at FILE",
  "  --recorder LIB    the recorder library (default: $MEMPLAY_RECORDER, else libmemplay_recorder.so",
  "                    beside memplay or in its library folder)",
  "  exit status: the program's own (128+N when signal N ended it); 1 or 2 when memplay fails first",
  NULL,
};
const cli_usage cmd_record_usage = {
  .summary = "run a CUDA program under the recorder and import what it did as a new trace",
  .lines = record_usage,
};

static const struct option record_options[] = {
  {"name", required_argument, NULL, 'n'},
  {"output", required_argument, NULL, 'o'},
  {"recorder", required_argument, NULL, 'r'},
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

typedef struct record_args {
  const char *name, *output, *recorder;
  char **cmd; /* the program and its arguments */
} record_args;

/* Parses record's options up to the program, which must follow. Returns 0, or -1 with the exit
 * code in *code. */
static int record_parse(int argc, char **argv, cli *c, record_args *a, int *code) {
  memset(a, 0, sizeof *a);
  *code = CLI_OK;
  int opt;
  /* '+': options stop at the command, whose own options are its business. */
  while ((opt = cli_getopt(argc, argv, "+hn:o:r:", record_options)) != -1) {
    int r = cli_common_option(c, "record", opt, code);
    if (r < 0) return -1;
    if (r) continue;
    if (opt == 'n') a->name = optarg;
    else if (opt == 'o') a->output = optarg;
    else if (opt == 'r') a->recorder = optarg;
  }
  if (optind >= argc) {
    *code = cli_usage_error("record", "no COMMAND given (write it after --)");
    return -1;
  }
  a->cmd = argv + optind;
  return 0;
}

#ifdef MEMPLAY_HAVE_CUDA
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda/cudart.h"
#include "import/importer.h"
#include "io/jsonw.h"
#include "io/outfile.h"
#include "sim/hashmap.h"

#define RECORDER_NAME "libmemplay_recorder.so"

/* The recorder library: --recorder, $MEMPLAY_RECORDER, beside memplay, or in its library folder. */
static char *find_recorder(const char *given, char *err, size_t errlen) {
  /* err is large enough for the folder's path (PATH_MAX) and the message around it. */
  const char *env = getenv("MEMPLAY_RECORDER");
  const char *explicit = given ? given : env && *env ? env : NULL;
  if (explicit) {
    char *p = realpath(explicit, NULL);
    if (!p) snprintf(err, errlen, "cannot use the recorder '%s': %s", explicit, strerror(errno));
    return p;
  }
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    snprintf(err, errlen, "cannot find memplay's own folder: %s", strerror(errno));
    return NULL;
  }
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  static const char *const rel[] = {"", MEMPLAY_RECORDER_RELDIR "/"};
  for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s%s", exe, rel[i], RECORDER_NAME);
    if (access(path, R_OK) == 0) return realpath(path, NULL);
  }
  snprintf(err, errlen,
           "cannot find %s beside memplay or in %s/%s: name it with --recorder or MEMPLAY_RECORDER", RECORDER_NAME,
           exe, MEMPLAY_RECORDER_RELDIR);
  return NULL;
}

/* Loads the recorder in a child process, as the driver will load it into the recorded program, so
 * that a library that cannot be loaded (CUPTI missing, a symbol left unresolved) is reported
 * before the program runs, not found out afterwards as a program that left no trace. The child
 * keeps whatever the library's loading does away from memplay. 0, or -1 after writing err. */
static int recorder_loads(const char *lib, char *err, size_t errlen) {
  int fd[2];
  pid_t pid = pipe(fd) ? -2 : fork();
  if (pid < 0) {
    snprintf(err, errlen, "cannot check the recorder '%s': %s", lib, strerror(errno));
    if (pid == -1) { /* the pipe was made, the fork failed */
      close(fd[0]);
      close(fd[1]);
    }
    return -1;
  }
  if (pid == 0) {
    close(fd[0]);
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    const char *why = !h ? dlerror() : dlsym(h, "InitializeInjection") ? "" : "it has no InitializeInjection";
    if (!why) why = "unknown loader error";
    (void)!write(fd[1], why, strlen(why));
    _exit(0);
  }
  close(fd[1]);
  char why[1024];
  size_t n = 0;
  while (n < sizeof why - 1) {
    ssize_t r = read(fd[0], why + n, sizeof why - 1 - n);
    if (r > 0)
      n += (size_t)r;
    else if (!(r < 0 && errno == EINTR))
      break;
  }
  why[n] = 0;
  close(fd[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (n == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
  snprintf(err, errlen, "the recorder '%s' cannot be loaded: %s", lib,
           n ? why : "loading it ended the checking process abnormally");
  return -1;
}

static const char *base_name(const char *path) {
  const char *b = strrchr(path, '/');
  return b ? b + 1 : path;
}

typedef struct recorded {
  long pid;
  char *path;
  int64_t id, events;
  char *name;
} recorded;

typedef struct rec_list {
  recorded *v;
  size_t n, cap;
  char **errors;
  size_t nerr, caperr;
  int partial; /* a process started writing but did not finish */
} rec_list;

static int cmp_pid(const void *a, const void *b) {
  const recorded *x = a, *y = b;
  return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
  buf[n] = 0;
  return strdup(buf);
}

static void scan(const char *dir, rec_list *l) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (end == e->d_name) continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (!strcmp(end, ".jsonl")) {
      sim_grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v);
      l->v[l->n++] = (recorded){pid, strdup(path), 0, 0, NULL};
    } else if (!strcmp(end, ".error")) {
      char *text = read_text(path);
      sim_grow((void **)&l->errors, &l->caperr, l->nerr + 1, sizeof *l->errors);
      char *msg = malloc(strlen(text ? text : "") + 64);
      sprintf(msg, "process %ld: %s", pid, text ? text : "the recorder failed");
      l->errors[l->nerr++] = msg;
      free(text);
    } else if (!strcmp(end, ".jsonl.part")) {
      l->partial++;
    }
  }
  closedir(d);
  if (l->n) qsort(l->v, l->n, sizeof *l->v, cmp_pid);
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char path[8192];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(dir);
}

static int copy_file(const char *from, const char *to, char *err, size_t errlen) {
  FILE *in = fopen(from, "rb");
  if (!in) {
    snprintf(err, errlen, "cannot read '%s': %s", from, strerror(errno));
    return -1;
  }
  outfile *out = outfile_open(to, err, errlen);
  if (!out) {
    fclose(in);
    return -1;
  }
  char buf[1 << 16];
  size_t n;
  int rc = 0;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, outfile_stream(out)) != n) rc = -1;
  if (ferror(in)) rc = -1;
  fclose(in);
  if (rc) {
    snprintf(err, errlen, "cannot write '%s': %s", to, strerror(errno));
    outfile_abort(out);
    return -1;
  }
  return outfile_commit(out, err, errlen);
}

/* FILE, or FILE with -PID before its extension when several processes were recorded. */
static char *output_path(const char *output, long pid, int several) {
  size_t n = strlen(output) + 32;
  char *p = malloc(n);
  if (!several) {
    snprintf(p, n, "%s", output);
    return p;
  }
  const char *dot = strrchr(output, '.');
  const char *slash = strrchr(output, '/');
  if (!dot || (slash && dot < slash)) dot = output + strlen(output);
  snprintf(p, n, "%.*s-%ld%s", (int)(dot - output), output, pid, dot);
  return p;
}

static void on_trace(void *arg, int64_t id, const char *name, int64_t events) {
  recorded *r = arg;
  r->id = id;
  r->events = events;
  free(r->name);
  r->name = strdup(name);
}

static void on_warning(void *arg, const char *msg) {
  (void)arg;
  cli_warning("%s", msg);
}

/* Runs argv with the recorder injected; returns the wait status, or -1 with a message. */
static int run_program(char **argv, const char *lib, const char *dir, char *err, size_t errlen) {
  int pfd[2];
  if (pipe(pfd)) {
    snprintf(err, errlen, "cannot run '%s': %s", argv[0], strerror(errno));
    return -1;
  }
  fcntl(pfd[1], F_SETFD, FD_CLOEXEC);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, errlen, "cannot run '%s': %s", argv[0], strerror(errno));
    close(pfd[0]);
    close(pfd[1]);
    return -1;
  }
  if (pid == 0) {
    close(pfd[0]);
    setenv("CUDA_INJECTION64_PATH", lib, 1);
    setenv("MEMPLAY_RECORD_DIR", dir, 1);
    execvp(argv[0], argv);
    int e = errno;
    ssize_t w = write(pfd[1], &e, sizeof e);
    (void)w;
    _exit(127);
  }
  close(pfd[1]);
  int child_errno = 0;
  ssize_t got = read(pfd[0], &child_errno, sizeof child_errno);
  close(pfd[0]);
  /* Like system(): the terminal's interrupt goes to the program; memplay waits and imports. */
  struct sigaction ign, old_int, old_quit;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ign, &old_int);
  sigaction(SIGQUIT, &ign, &old_quit);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGQUIT, &old_quit, NULL);
  if (got == (ssize_t)sizeof child_errno) {
    snprintf(err, errlen, "cannot run '%s': %s", argv[0], strerror(child_errno));
    return -1;
  }
  return status;
}

/* Checks what recording needs before the program runs: the recorder library (its path in *lib, and
 * that it loads), the CUDA driver, the store, and a free name. The store, or NULL after the message. */
static store *record_open(cli *c, const record_args *a, char **lib) {
  char err[2048], lerr[8192];
  /* The recorder is checked first: its check forks, which is safest before CUDA starts threads. */
  *lib = find_recorder(a->recorder, lerr, sizeof lerr);
  if (*lib && recorder_loads(*lib, lerr, sizeof lerr)) {
    free(*lib);
    *lib = NULL;
  }
  if (!*lib) {
    cli_error("%s", lerr);
    return NULL;
  }
  cudart_info *info = calloc(1, sizeof *info);
  int probe = cudart_probe(info, err, sizeof err);
  free(info);
  if (probe) {
    cli_error("cannot record '%s': %s", a->cmd[0], err);
    free(*lib);
    *lib = NULL;
    return NULL;
  }
  store *s = cli_open_store(c, 1);
  store_trace t;
  if (s && a->name && store_trace_find(s, a->name, &t) == 0) {
    store_trace_clear(&t);
    cli_error("a trace named '%s' already exists (choose another --name, or 'memplay rm' it)", a->name);
    store_close(s);
    s = NULL;
  }
  if (!s) {
    free(*lib);
    *lib = NULL;
  }
  return s;
}

/* A new folder for the recorder to write into, as an absolute path (the program may change
 * folder). 0, or -1 after the message. */
static int record_dir_make(char *dir, size_t n) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, n, "%s/memplay-record-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  char *made = mkdtemp(dir) ? realpath(dir, NULL) : NULL;
  if (!made) {
    cli_error("cannot make a folder for the recording in '%s': %s", tmp && *tmp ? tmp : "/tmp", strerror(errno));
    return -1;
  }
  snprintf(dir, n, "%s", made);
  free(made);
  return 0;
}

/* Imports each recorded process's trace (and copies it to --output). 1 when any failed. */
static int import_recordings(store *s, rec_list *l, const record_args *a) {
  int failed = 0;
  char err[2048];
  const char *base = a->name ? a->name : base_name(a->cmd[0]);
  for (size_t i = 0; i < l->n; i++) {
    recorded *r = &l->v[i];
    char *out = a->output ? output_path(a->output, r->pid, l->n > 1) : NULL;
    if (out && copy_file(r->path, out, err, sizeof err)) {
      cli_error("%s", err);
      failed = 1;
    }
    char want[512];
    if (l->n > 1) snprintf(want, sizeof want, "%s-%ld", base, r->pid);
    else snprintf(want, sizeof want, "%s", base);
    char *tname = a->name ? strdup(want) : store_unique_name(s, want);
    import_ctx ic = {.s = s, .path = r->path, .name = tname, .on_trace = on_trace, .on_warning = on_warning, .arg = r};
    if (import_file(&ic, "jsonl")) {
      cli_error("cannot import the trace of process %ld: %s", r->pid, ic.err);
      failed = 1;
    } else {
      /* The file it came from is gone; keep the copy's path when there is one. */
      store_trace_set_source_file(s, r->id, out);
    }
    free(tname);
    free(out);
  }
  return failed;
}

static void print_json(int status, const rec_list *l) {
  yajl_gen g = jsonw_file(stdout, 0);
  yajl_gen_map_open(g);
  jsonw_kint(g, "exit_status", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  jsonw_str(g, "signal");
  if (WIFSIGNALED(status)) jsonw_int(g, WTERMSIG(status));
  else jsonw_null(g);
  jsonw_str(g, "traces");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < l->n; i++) {
    if (!l->v[i].id) continue;
    yajl_gen_map_open(g);
    jsonw_kint(g, "id", l->v[i].id);
    jsonw_kstr(g, "name", l->v[i].name);
    jsonw_kint(g, "events", l->v[i].events);
    jsonw_kint(g, "pid", l->v[i].pid);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
  jsonw_str(g, "errors");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < l->nerr; i++) jsonw_str(g, l->errors[i]);
  yajl_gen_array_close(g);
  yajl_gen_map_close(g);
  yajl_gen_free(g);
  putchar('\n');
}

static void print_human(store *s, const rec_list *l, const char *program, int prog) {
  for (size_t i = 0; i < l->n; i++)
    if (l->v[i].id)
      printf("recorded '%s' (process %ld): %lld events, trace %lld in %s\n", l->v[i].name, l->v[i].pid,
             (long long)l->v[i].events, (long long)l->v[i].id, store_path(s));
  if (prog) printf("'%s' exited with status %d\n", program, prog);
}

static void rec_list_release(rec_list *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->v[i].path);
    free(l->v[i].name);
  }
  free(l->v);
  for (size_t i = 0; i < l->nerr; i++) free(l->errors[i]);
  free(l->errors);
}

int cmd_record(int argc, char **argv, cli *c) {
  record_args a;
  int code;
  if (record_parse(argc, argv, c, &a, &code)) return code;
  if (a.name && !*a.name) return cli_usage_error("record", "--name wants a non-empty name");
  char *lib;
  store *s = record_open(c, &a, &lib);
  if (!s) return CLI_FAIL;
  char dir[4096];
  if (record_dir_make(dir, sizeof dir)) {
    store_close(s);
    free(lib);
    return CLI_FAIL;
  }
  if (getenv("CUDA_INJECTION64_PATH"))
    cli_warning("CUDA_INJECTION64_PATH was set ('%s'); the recorder replaces it for this run",
                getenv("CUDA_INJECTION64_PATH"));
  char err[2048];
  int status = run_program(a.cmd, lib, dir, err, sizeof err);
  free(lib);
  if (status < 0) {
    cli_error("%s", err);
    remove_dir(dir);
    store_close(s);
    return CLI_FAIL;
  }
  int prog = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
  if (WIFSIGNALED(status)) cli_warning("'%s' was ended by signal %d", a.cmd[0], WTERMSIG(status));

  rec_list l = {0};
  scan(dir, &l);
  for (size_t i = 0; i < l.nerr; i++) cli_warning("%s", l.errors[i]);
  if (l.partial) cli_warning("%d process%s ended while writing its trace", l.partial, l.partial == 1 ? "" : "es");
  int failed = import_recordings(s, &l, &a);
  if (l.n == 0) {
    cli_error("'%s' left no trace: it did not use CUDA, or it ended without exiting normally (killed, _exit, a "
              "crash), or the recorder could not start",
              a.cmd[0]);
    failed = 1;
  }
  if (c->json) print_json(status, &l);
  else print_human(s, &l, a.cmd[0], prog);
  rec_list_release(&l);
  remove_dir(dir);
  store_close(s);
  return prog ? prog : failed ? CLI_FAIL : CLI_OK;
}

#else

int cmd_record(int argc, char **argv, cli *c) {
  record_args a;
  int code;
  if (record_parse(argc, argv, c, &a, &code)) return code;
  cli_error("this memplay was built without CUDA support, so it cannot record '%s': build it where the CUDA "
            "toolkit is installed (see docs/gpu.md)",
            a.cmd[0]);
  return CLI_FAIL;
}

#endif
