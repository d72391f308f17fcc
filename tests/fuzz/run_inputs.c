/* run_inputs.c: a harness of tests/fuzz without libFuzzer: each file named (or each file of each folder named) is one input, run once; the seeds as a test. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Runs one file: 0, or -1 when it cannot be read. A failed input aborts, as under libFuzzer. */
static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return -1;
  }
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0, got;
  do {
    if (n == cap) {
      cap = cap ? 2 * cap : 4096;
      uint8_t *grown = realloc(buf, cap);
      if (!grown) abort();
      buf = grown;
    }
    got = fread(buf + n, 1, cap - n, f);
    n += got;
  } while (got);
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    perror(path);
    free(buf);
    return -1;
  }
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Runs every file of a folder, in name order: the count run, or -1. */
static int run_folder(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    perror(dir);
    return -1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      char **grown = realloc(names, cap * sizeof *names);
      if (!grown) abort();
      names = grown;
    }
    size_t len = strlen(dir) + strlen(e->d_name) + 2;
    names[n] = malloc(len);
    if (!names[n]) abort();
    snprintf(names[n++], len, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof *names, by_name);
  int rc = (int)n;
  for (size_t i = 0; i < n; i++) {
    if (run_file(names[i])) rc = -1;
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE-OR-FOLDER...\n", argv[0]);
    return 2;
  }
  int ran = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st)) {
      perror(argv[i]);
      return 1;
    }
    int rc = S_ISDIR(st.st_mode) ? run_folder(argv[i]) : run_file(argv[i]) ? -1 : 1;
    if (rc < 0) return 1;
    ran += rc;
  }
  if (!ran) {
    fprintf(stderr, "%s: no inputs\n", argv[0]);
    return 1;
  }
  printf("%d inputs ran clean\n", ran);
  return 0;
}
