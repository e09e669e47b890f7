/* A reply's reasoning and its answer, apart: what reasoning models (Qwen3,
 * QwQ, DeepSeek-R1 and its distills) write between <think> and </think>
 * goes to the chat API's "reasoning_content", the rest to "content", as
 * vLLM's reasoning parsers and llama-server's --reasoning-format do.
 *
 * gpt-oss writes OpenAI's harmony format instead: messages on channels,
 * "<|channel|>analysis<|message|>...<|end|>" (the reasoning) then
 * "<|start|>assistant<|channel|>final<|message|>..." (the answer); the
 * first analysis message is the reasoning, the first message on another
 * channel the content (reasoning_harmony.c).
 *
 * A reply may open its reasoning itself (Qwen3 writes "<think>" first) or
 * find it opened by the prompt (DeepSeek-R1's template ends the prompt with
 * "<think>\n", so the reply holds only "</think>"). Leading whitespace of
 * each part, and whitespace before "</think>", is dropped. A reply that
 * does not start with "<think>" (after whitespace), in a prompt that did
 * not open one, is all content: <think> later on is then text.
 *
 * Streamed, the split of the text so far only ever grows: what it returns
 * with final false is never taken back (a partial "</thi" at the end, or
 * trailing whitespace of the reasoning, waits for the next text). */
#ifndef CLLM_CHAT_REASONING_H
#define CLLM_CHAT_REASONING_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    REASONING_NONE,    /* replies are all content */
    REASONING_THINK,   /* <think> ... </think> */
    REASONING_HARMONY, /* gpt-oss's channels */
} reasoning_format;

/* The format a chat template's replies use: HARMONY when it mentions
 * <|channel|>, THINK when it mentions <think>. */
reasoning_format reasoning_format_detect(const char *template_source);
/* "none", "think" (also vLLM's parser names "deepseek_r1" and "qwen3"),
 * "harmony" (also "gpt_oss", "openai_gptoss"); false for an unknown name. */
bool reasoning_format_parse(const char *name, reasoning_format *out);
const char *reasoning_format_name(reasoning_format f);

/* Whether a rendered prompt's end opens the reasoning ("<think>" then only
 * whitespace); `tail` is the prompt's last characters. */
bool reasoning_prompt_opens(const char *tail, size_t len);

typedef struct {
    size_t reasoning_from, reasoning_to; /* [from, to): the reasoning (empty when none) */
    size_t content_from, content_to;     /* [from, to): the content so far */
    size_t rest_from; /* where the reply past its reasoning starts, markup included: what a tool
                         parser reads (THINK: content_from; HARMONY: the next message's header) */
    bool rest_known;  /* rest_from is final (it never moves once known) */
    bool reasoned;    /* the reply has a reasoning part (maybe empty) */
} reasoning_split;

/* Splits text[0, len) in format f: `opened` when the prompt opened the
 * reasoning (THINK), `final` when the reply has ended. */
void reasoning_split_text(reasoning_format f, const char *text, size_t len, bool opened, bool final,
                          reasoning_split *out);
/* The HARMONY case of reasoning_split_text (reasoning_harmony.c). */
void harmony_split_text(const char *text, size_t len, bool final, reasoning_split *out);
/* One harmony message read at `at`: its header [at, header_end) (an
 * optional <|start|>ROLE, <|channel|>NAME, a recipient, ...), its body
 * [body, end), which ends at <|end|>, <|call|>, <|return|> or the next
 * <|start|>, and where the text after it starts (next; len while the body
 * is open). Unfinished (final false), a partial marker at the end is left
 * out of the body. False while the header is not complete (no <|message|>
 * yet). Both the reasoning split and the harmony tool parser read replies
 * with it. */
typedef struct {
    size_t header_end, body, end, next;
    bool analysis; /* on the analysis channel: the reasoning */
} harmony_message;
bool harmony_message_at(const char *text, size_t at, size_t len, bool final, harmony_message *m);
/* The longest end of t[from, len) that begins `tag` without completing it
 * (what a stream holds back until the next text decides it). */
size_t reasoning_partial_tag(const char *t, size_t from, size_t len, const char *tag);

/* What a stream has sent of one reply. Zero-initialize. */
typedef struct {
    size_t reasoning_sent, content_sent; /* ends of what was sent, in the reply's text */
    bool rest_started;                   /* rest_start is known */
    size_t rest_start; /* where the reply past its reasoning starts (reasoning_split.rest_from) */
} reasoning_stream;

/* The reasoning and content of text[0, len) not sent yet, as ranges of
 * text (out->reasoned as for the whole text), and marks them sent. */
void reasoning_stream_next(reasoning_stream *rs, reasoning_format f, const char *text, size_t len,
                           bool opened, bool final, reasoning_split *out);

#endif
