/* schema_ref_gen.c: prints, as a C header, the schema listing this memplay's migrations make (a build step). */
#include <stdio.h>

#include "store_int.h"

/*
 * Every store memplay opens is checked against the schema its migrations make (store_schema_check);
 * building that reference in an in-memory database costs SQLite most of a millisecond per DDL
 * statement. The build runs this program once and store.c compares a store of the current version
 * with the listing it prints, STORE_SCHEMA_REF; only a store that differs, or one of an older
 * version, builds the reference at run time (so a different SQLite at run time than at build time
 * costs time, never a wrong answer).
 */
int main(void) {
  sqlite3 *db;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) return fprintf(stderr, "schema_ref_gen: cannot open SQLite\n"), 1;
  for (int v = 1; v <= store_schema_version; v++) {
    const char *after = store_migration_after(v);
    if (sqlite3_exec(db, store_migration(v), NULL, NULL, NULL) != SQLITE_OK ||
        (after && sqlite3_exec(db, after, NULL, NULL, NULL) != SQLITE_OK))
      return fprintf(stderr, "schema_ref_gen: migration %d: %s\n", v, sqlite3_errmsg(db)), 1;
  }
  char *t = store_schema_listing(db);
  if (!t) return fprintf(stderr, "schema_ref_gen: %s\n", sqlite3_errmsg(db)), 1;
  printf("/* store_schema_ref.h: made by schema_ref_gen at build time; do not edit. */\n");
  printf("#define STORE_SCHEMA_REF_VERSION %d\n#define STORE_SCHEMA_REF \\\n  \"", store_schema_version);
  for (const unsigned char *p = (const unsigned char *)t; *p; p++) {
    if (*p == '\n') printf("\\n\" \\\n  \"");
    else if (*p == '"' || *p == '\\' || *p == '?') printf("\\%c", *p); /* '?': no trigraph */
    else if (*p < 0x20 || *p >= 0x7f) printf("\\%03o", *p);
    else putchar(*p);
  }
  printf("\"\n");
  sqlite3_free(t);
  sqlite3_close(db);
  return 0;
}
