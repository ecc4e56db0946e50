/*
 * Completion of a partial hcctl command line, from the command tables. One engine serves the
 * interactive shell (readline asks it on TAB) and the hidden `hcctl __complete`, which the
 * bash, zsh and fish scripts printed by `hcctl completion SHELL` call for every completion, so
 * that every shell offers the same words, including values only the controller knows (node
 * names, operation ids, bundle versions).
 *
 * The engine walks the words before the cursor with the parser's own walker
 * (common/cmdline.h), so both read a line the same way: global options up to the group word,
 * the group, the verb, then the verb's options (which shadow global options of the same name,
 * and may be abbreviated to a unique prefix) and positionals; "--" ends the options; a
 * value-taking option consumes the next word unless written "--name=value" or "-xVALUE". Where
 * the walk ends decides what the current word is: a group, a verb, an option name, an option's
 * value, or a positional argument, completed through the table's completer kinds.
 */
#ifndef HC_CLI_COMPLETE_H
#define HC_CLI_COMPLETE_H

#include <stddef.h>
#include <stdint.h>

#include "cli/cmd.h"

/* Where dynamic values come from. Each field NULL means: the environment or the config file,
 * as for any command (cli/config.h). Words on the line (--controller, --token, --ca) win. */
struct hc_complete_conn {
    const char *controller, *token, *ca_file;
    int64_t timeout_ms; /* per request; a completion must not hang a shell (0: 2 s) */
    int offline;        /* never ask the controller */
};

/* The candidates for one completion. */
struct hc_complete {
    char **items; /* "WORD" or "WORD\tDESCRIPTION", in table order, filtered by the prefix */
    size_t n, cap;
    int files; /* the word is a local file name: the caller completes it (shells do it best) */
};

/* Completes cur (the word under the cursor, "" for a new word) after the nwords complete
 * words that follow "hcctl" on the line. conn may be NULL (environment and config file).
 * Returns 0, or -1 when out of memory. Failures to reach the controller are silent: they give
 * no candidates. Clear out with hc_complete_clear. */
int hc_complete_line(const struct hc_cmd_group *const *groups, int nwords, char *const *words,
                     const char *cur, const struct hc_complete_conn *conn, struct hc_complete *out);
void hc_complete_clear(struct hc_complete *c);

/* Splits a line into words as a POSIX shell would without expansions: blanks separate words,
 * single quotes keep everything, double quotes keep everything but \" \\ \$ \`, a backslash
 * outside quotes keeps the next character, and "#" at the start of a word begins a comment.
 * With partial (completion of a line being typed) an unterminated quote is not an error: the
 * last word is the one being typed; *open_word receives 1 when the line does not end in a
 * blank (the last word is incomplete), else 0 (may be NULL).
 * Returns the number of words (>= 0, *words NULL-terminated, free with hc_shell_words_free), or
 * -1 with err (an unterminated quote without partial; out of memory). */
int hc_shell_split(const char *line, int partial, char ***words, int *open_word,
                   struct hc_error *err);
void hc_shell_words_free(char **words);

/* The scripts printed by `hcctl completion SHELL`; NULL for an unknown shell. */
const char *hc_complete_script(const char *shell);

#endif
