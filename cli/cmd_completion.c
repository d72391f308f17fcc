/* cmd_completion.c: `memplay completion bash|zsh` and the man page, both generated from the command table. */
#include <ctype.h>
#include <string.h>

#include "store/store.h"
#include "cli.h"

static const char *const completion_usage[] = {
  "memplay completion bash|zsh|man",
  "  bash   a bash completion script: eval \"$(memplay completion bash)\", or save it in",
  "         /usr/share/bash-completion/completions/memplay",
  "  zsh    a zsh completion function: save it as _memplay in a folder of $fpath",
  "  man    the manual page, memplay.1, in roff (cmake --install installs it)",
  NULL,
};
const cli_usage cmd_completion_usage = {
  .summary = "print shell completion for bash or zsh, or the manual page",
  .lines = completion_usage,
};

/* One option of a command, as its usage lines give it: "  --name NAME   what it does". */
typedef struct usage_option {
  char name[48], arg[32];
  const char *help; /* into the usage line */
} usage_option;

/* Reads an option line of a usage; 0 when the line is not one. */
static int option_line(const char *line, usage_option *o) {
  while (*line == ' ') line++;
  if (strncmp(line, "--", 2)) return 0;
  size_t n = strcspn(line, " "), name = strcspn(line, " ["); /* "--pace[=clock|gaps]": an optional value */
  if (n >= sizeof o->name) return 0;
  memcpy(o->name, line, name);
  o->name[name] = 0;
  const char *p = line + n;
  while (*p == ' ') p++;
  o->arg[0] = 0;
  size_t a = strcspn(p, " ");
  if (a && a < sizeof o->arg && isupper((unsigned char)*p) && p[a] == ' ' && p[a + 1] == ' ') {
    memcpy(o->arg, p, a);
    o->arg[a] = 0;
    p += a;
    while (*p == ' ') p++;
  }
  o->help = p;
  return 1;
}

/* Whether a command takes a stored trace (TRACE in its synopsis) or files (FILE). */
static int takes(const cli_command *c, const char *what) { return strstr(c->usage->lines[0], what) != NULL; }

static void bash_options(const cli_command *c) {
  usage_option o;
  printf("    %s) opts=\"--db --json --verbose --help", c->name);
  for (const char *const *l = c->usage->lines + 1; *l; l++)
    if (option_line(*l, &o) && strcmp(o.name, "--db") && strcmp(o.name, "--json")) printf(" %s", o.name);
  printf("\"; what=%s ;;\n", takes(c, "TRACE") ? "trace" : takes(c, "FILE") || takes(c, "SCRIPT") ? "file" : "none");
}

static void print_bash(void) {
  printf("# bash completion for memplay (memplay completion bash), generated from its command table.\n"
         "_memplay() {\n"
         "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\" cmd=\"\" i\n"
         "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
         "    case \"${COMP_WORDS[i]}\" in\n"
         "      --db) ((i++)) ;;\n"
         "      -*) ;;\n"
         "      *) cmd=\"${COMP_WORDS[i]}\"; break ;;\n"
         "    esac\n"
         "  done\n"
         "  if [[ $prev == --db || $prev == -o || $prev == --out ]]; then\n"
         "    COMPREPLY=($(compgen -f -- \"$cur\")); return\n"
         "  fi\n"
         "  if [[ -z $cmd ]]; then\n"
         "    COMPREPLY=($(compgen -W \"");
  for (const cli_command *c = cli_commands; c->name; c++) printf("%s ", c->name);
  printf("--db --json --verbose --version --help\" -- \"$cur\")); return\n"
         "  fi\n"
         "  local opts=\"\" what=none\n"
         "  case \"$cmd\" in\n");
  for (const cli_command *c = cli_commands; c->name; c++) bash_options(c);
  printf("  esac\n"
         "  if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\")); return; fi\n"
         "  case \"$what\" in\n"
         "    trace) COMPREPLY=($(compgen -W \"$(command memplay list 2>/dev/null | awk 'NR > 1 {print $2}')\" -- \"$cur\")) ;;\n"
         "    file) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
         "  esac\n"
         "}\n"
         "complete -F _memplay memplay\n");
}

/* Text for inside a zsh _arguments spec: no quotes, brackets or colons. */
static void zsh_text(const char *s, size_t max) {
  for (size_t i = 0; s[i] && i < max; i++) {
    char ch = s[i];
    if (ch == '\'' || ch == '[' || ch == ']' || ch == ':' || ch == '\\') ch = ' ';
    putchar(ch);
  }
}

static void zsh_command(const cli_command *c) {
  usage_option o;
  printf("    %s)\n      _arguments \\\n", c->name);
  printf("        '--db[the store]:store file:_files' '--json[one JSON object]' '--verbose[store errors in full]' \\\n");
  for (const char *const *l = c->usage->lines + 1; *l; l++) {
    if (!option_line(*l, &o) || !strcmp(o.name, "--db") || !strcmp(o.name, "--json")) continue;
    printf("        '%s[", o.name);
    zsh_text(o.help, 70);
    printf("]%s%s%s' \\\n", o.arg[0] ? ":" : "", o.arg, o.arg[0] ? ":" : "");
  }
  if (takes(c, "TRACE")) printf("        '*:trace:_memplay_traces'\n      ;;\n");
  else if (takes(c, "FILE") || takes(c, "SCRIPT")) printf("        '*:file:_files'\n      ;;\n");
  else printf("        '*::'\n      ;;\n");
}

static void print_zsh(void) {
  printf("#compdef memplay\n"
         "# zsh completion for memplay (memplay completion zsh), generated from its command table.\n"
         "_memplay_traces() {\n"
         "  local -a traces\n"
         "  traces=(${(f)\"$(command memplay list 2>/dev/null | awk 'NR > 1 {print $2}')\"})\n"
         "  compadd -a traces\n"
         "}\n"
         "_memplay() {\n"
         "  local -a commands\n"
         "  commands=(\n");
  for (const cli_command *c = cli_commands; c->name; c++) {
    printf("    '%s:", c->name);
    zsh_text(c->usage->summary, 200);
    printf("'\n");
  }
  printf("  )\n"
         "  if (( CURRENT == 2 )); then _describe 'command' commands; return; fi\n"
         "  local cmd=${words[2]}\n"
         "  shift words; (( CURRENT-- ))\n"
         "  case $cmd in\n");
  for (const cli_command *c = cli_commands; c->name; c++) zsh_command(c);
  printf("  esac\n"
         "}\n"
         "_memplay \"$@\"\n");
}

/* roff text: a leading '.' or '\'' and every backslash escaped; '-' as the minus it is. */
static void roff(const char *s) {
  if (*s == '.' || *s == '\'') fputs("\\&", stdout);
  for (; *s; s++) {
    if (*s == '\\') fputs("\\e", stdout);
    else if (*s == '-') fputs("\\-", stdout);
    else putchar(*s);
  }
}

static void print_man(void) {
  printf(".TH MEMPLAY 1 \"\" \"memplay %s\" \"User Commands\"\n", MEMPLAY_VERSION);
  printf(".SH NAME\nmemplay \\- GPU memory trace replay: import traces, replay them through allocator models, ask what if\n");
  printf(".SH SYNOPSIS\n.B memplay\n[\\fB\\-\\-db\\fR \\fIFILE\\fR] [\\fB\\-\\-json\\fR] [\\fB\\-\\-verbose\\fR] "
         "\\fICOMMAND\\fR [\\fIARGS\\fR]\n.br\n.B memplay \\-\\-version\n");
  printf(".SH DESCRIPTION\nmemplay stores GPU memory traces (PyTorch memory snapshots, profiler traces, memory "
         "timelines, Nsight Systems exports, JSON Lines) in an SQLite file and replays them through exact models of "
         "the allocators frameworks use (PyTorch's caching allocator, TensorFlow's BFC, cudaMalloc, "
         "cudaMallocAsync), to predict peak memory, fragmentation, out-of-memory failures and step time on "
         "another device or under other settings. Every replay is stored as a run.\n");
  printf(".SH COMMANDS\n");
  for (const cli_command *c = cli_commands; c->name; c++) {
    printf(".TP\n.B %s\n", c->name);
    roff(c->usage->summary);
    printf(".\n.RS\n.nf\n");
    for (const char *const *l = c->usage->lines; *l; l++) {
      roff(*l);
      putchar('\n');
    }
    printf(".fi\n.RE\n");
  }
  printf(".SH OPTIONS\nEvery command takes these.\n"
         ".TP\n\\fB\\-\\-db\\fR \\fIFILE\\fR\nthe store (default: \\fB$MEMPLAY_DB\\fR, else ./memplay.db)\n"
         ".TP\n\\fB\\-\\-json\\fR\none JSON object on standard output, for scripts\n"
         ".TP\n\\fB\\-\\-verbose\\fR\nstore errors with SQLite's own words and the SQL that failed\n"
         ".TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\nthe command's usage\n"
         ".TP\n\\fB\\-\\-version\\fR\nthe version, and the store schema version (%d)\n",
         store_schema_version);
  printf(".SH ENVIRONMENT\n"
         ".TP\n.B MEMPLAY_DB\nthe store when \\fB\\-\\-db\\fR is not given\n"
         ".TP\n.B MEMPLAY_SCRIPTS\na folder searched first for scenarios named without a folder\n"
         ".TP\n.B PYTORCH_CUDA_ALLOC_CONF\\fR, \\fBPYTORCH_HIP_ALLOC_CONF\n"
         "read by \\fBreplay\\fR's torch model as PyTorch reads them (the report and the stored run say so)\n"
         ".TP\n.B TF_FORCE_GPU_ALLOW_GROWTH\\fR, \\fBTF_ENABLE_GPU_GARBAGE_COLLECTION\nread by \\fBreplay\\fR's bfc model\n");
  printf(".SH EXIT STATUS\n0 success; 1 failed to run; 2 usage error; 3 the answer is \"no\" (a predicted OOM or a "
         "threshold crossed, where a command checks one).\n");
  printf(".SH FILES\n.TP\n.I ./memplay.db\nthe default store (SQLite; its schema is in docs/trace\\-store.md)\n");
  printf(".SH SEE ALSO\n\\fBmemplay help allocators\\fR, \\fBmemplay help scenarios\\fR, \\fBmemplay help "
         "formats\\fR; README.md and docs/ in memplay's source.\n");
}

int cmd_completion(int argc, char **argv, cli *c) {
  (void)c;
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    cli_print_usage(stdout, cli_find_command("completion"));
    return cli_finish_output(CLI_OK);
  }
  if (argc != 2) return cli_usage_error("completion", argc < 2 ? "name a shell: bash or zsh" : "completion takes one word");
  if (!strcmp(argv[1], "bash")) print_bash();
  else if (!strcmp(argv[1], "zsh")) print_zsh();
  else if (!strcmp(argv[1], "man")) print_man();
  else if (argv[1][0] == '-') return cli_usage_error("completion", "unknown option '%s'", argv[1]);
  else return cli_usage_error("completion", "no completion for '%s': bash, zsh or man", argv[1]);
  return cli_finish_output(CLI_OK);
}
