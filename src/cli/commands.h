/* The subcommands of the cllm binary, one file each. Each takes the argv that
 * follows its name (argv[0] is the subcommand) and returns the exit code. */
#ifndef CLLM_CLI_COMMANDS_H
#define CLLM_CLI_COMMANDS_H

int cmd_serve(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_eval_compare(int argc, char **argv);
int cmd_medusa(int argc, char **argv);

#endif
