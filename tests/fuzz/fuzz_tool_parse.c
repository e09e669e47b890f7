/* libFuzzer harness: model replies read as tool calls (chat/tool_parse.c and
 * server/tool_output.c). The first byte picks the format; the rest is the
 * reply. The reply is read whole (message.tool_calls) and as a stream cut
 * into pieces of a size the first byte also picks, each call's parse over the
 * text so far. A long reply is cut into at most MAX_STREAM_STEPS pieces:
 * every step re-reads the text so far (and parses each call's arguments as
 * JSON, over a third of a step's time), so byte-sized pieces of a 4 KB
 * reply cost quadratic time and held a campaign to a few hundred inputs per
 * second; 64 pieces still fell to 1,100 a second as the corpus grew, 16 run
 * twice as many inputs. A reply under 16 times the piece size the first
 * byte picks (1-32 bytes) is still cut at that size. Whatever the bytes,
 * this must end without a crash, a leak or an out-of-bounds read, and every
 * span a parse reports lies in the text. Bit 1 of the first byte offers
 * two tools (the names the corpus's calls use), so replies are also read as
 * calls written in bare JSON (tool_parse_bare); bit 0 reads the reply in the
 * generic format as well (tool_parse_generic), whole and streamed. */
#include "chat/tool_parse.h"
#include "server/tool_output.h"

#include "fuzz_common.h"

#define MAX_STREAM_STEPS 16

static void check_spans(const tool_parse_result *r, size_t len) {
    for (int i = 0; i < r->n_content; i++)
        if (r->content[i].off + r->content[i].len > len) abort();
    for (int i = 0; i < r->n_calls; i++) {
        const tool_parsed_call *c = &r->calls[i];
        if (c->name.off + c->name.len > len || (!c->args_missing && c->args.off + c->args.len > len)) abort();
    }
}

static const char *const TOOL_NAMES[] = {"get_weather", "f"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static json_t *tools;
    if (!tools)
        tools = json_pack("[{s:s,s:{s:s}},{s:s,s:{s:s}}]", "type", "function", "function", "name", TOOL_NAMES[0],
                          "type", "function", "function", "name", TOOL_NAMES[1]);
    const json_t *offered = data[0] & 2 ? tools : NULL;
    const tool_format f = (tool_format)(1 + data[0] % 5);
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    size_t step = 1 + (data[0] >> 3);
    if (step < len / MAX_STREAM_STEPS) step = len / MAX_STREAM_STEPS;
    tool_parse_result r;
    tool_parse(f, text, len, true, &r);
    check_spans(&r, len);
    json_t *msg = json_object();
    tool_output_message(f, data[0] & 4, offered, text, len, msg);
    json_decref(msg);
    if (data[0] & 1) {
        buf content = {0};
        tool_parse_generic(text, len, true, &r, &content);
        check_spans(&r, len);
        buf_free(&content);
        msg = json_object();
        tool_output_message(TOOL_FORMAT_GENERIC, data[0] & 4, offered, text, len, msg);
        json_decref(msg);
        tool_stream gs = {0};
        for (size_t k = 0;; k += step) {
            const size_t n = k < len ? k : len;
            json_t *delta = json_object();
            tool_stream_delta(&gs, TOOL_FORMAT_GENERIC, true, offered, text, n, n == len, delta);
            json_decref(delta);
            if (n == len) break;
        }
    }
    tool_stream ts = {0};
    for (size_t k = 0;; k += step) {
        const size_t n = k < len ? k : len;
        tool_parse(f, text, n, n == len, &r);
        check_spans(&r, n);
        if (tool_parse_bare(text, n, n == len, TOOL_NAMES, 2, &r) != TOOL_BARE_NO) check_spans(&r, n);
        json_t *delta = json_object();
        tool_stream_delta(&ts, f, true, offered, text, n, n == len, delta);
        json_decref(delta);
        if (n == len) break;
    }
    return 0;
}
