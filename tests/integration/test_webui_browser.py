"""The chat page in a real browser: headless Chromium (Debian's chromium and
chromium-driver) driven by Selenium against `cllm serve` on a synthetic model.

A reply streams into the page (the DOM changes many times while it grows);
its numbers (tokens, tokens/s, time to first token, cached prompt tokens)
match the server's own counters; Stop aborts a long reply mid-way and the
server's running-request count and KV blocks in use return to 0; the
conversation survives a reload (localStorage), and conversations can be
added and deleted; Markdown and code are rendered while raw HTML in a reply
is never run; with --api-key the page asks for the key, keeps it, and asks
again when it is refused. A screenshot is saved as build/artifacts/webui.png.

Where Chromium cannot start, the tests fail, naming what to install: they are
never skipped."""

from __future__ import annotations

import json
import re
import time

import pytest

from server_util import CllmServer, default_chat_model, tiny_model

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 20
MAX_MODEL_LEN = 32768  # a long reply: tens of seconds, stopped after about one
STATS_RE = re.compile(r"(\d+) tokens(?: · ([\d.]+) tokens/s)?(?: · first token (\d+) ms)?"
                      r"(?: · prompt (\d+) tokens, (\d+) cached)?(?: · (\w+))?")


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,860"):
            options.add_argument(arg)
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    except Exception as err:  # noqa: BLE001 - whatever stops it, the test must fail and say so
        pytest.fail(f"headless Chromium could not start: {type(err).__name__}: {err}\n"
                    f"The chat page's browser test needs Debian's chromium and chromium-driver ({CHROMIUM}, "
                    f"{CHROMEDRIVER}) and PyPI's selenium: run scripts/setup.sh.", pytrace=False)
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def server(cllm_bin, model_factory):
    with CllmServer(cllm_bin, tiny_model(model_factory, n_ctx=MAX_MODEL_LEN), "--kv-cache-memory", "32MiB",
                    "--max-model-len", MAX_MODEL_LEN) as srv:
        yield srv


def wait(driver, predicate, what, timeout=WAIT_S):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: predicate(), message=what)


def css(driver, selector):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def open_page(driver, srv, model_name):
    driver.get(srv.url("/"))
    wait(driver, lambda: css(driver, "#model-name")[0].text == model_name, "the model's name from /v1/models")


def set_value(driver, element_id, value):
    box = css(driver, "#" + element_id)[0]
    box.clear()
    box.send_keys(str(value))


def assistant_replies(driver):
    return css(driver, "#messages .msg.assistant")


def send_and_wait(driver, text):
    """Sends a message; returns the parsed numbers under the reply once it ends."""
    from selenium.webdriver.common.keys import Keys

    before = len(assistant_replies(driver))
    css(driver, "#input")[0].send_keys(text + Keys.ENTER)
    wait(driver, lambda: len(css(driver, "#messages .msg.assistant .stats")) == before + 1, "the reply's numbers")
    return parse_stats(assistant_replies(driver)[-1])


def parse_stats(reply):
    from selenium.webdriver.common.by import By

    text = reply.find_element(By.CSS_SELECTOR, ".stats").text
    m = STATS_RE.fullmatch(text)
    assert m, f"unexpected numbers under a reply: {text!r}"
    tokens, per_s, ttft, prompt, cached, finish = m.groups()
    return {"tokens": int(tokens), "tokens_per_s": per_s and float(per_s), "ttft_ms": ttft and int(ttft),
            "prompt": prompt and int(prompt), "cached": cached and int(cached), "finish": finish, "text": text}


def abort_count(srv):
    return sum(v for k, v in srv.metrics().items()
               if k.startswith("vllm:request_success_total{") and 'finished_reason="abort"' in k)


def served_name(srv, key=None):
    return srv.get("/v1/models", headers=srv.headers(key) or None).json()["data"][0]["id"]


def stored_conversations(driver):
    return json.loads(driver.execute_script("return localStorage.getItem('cllm.conversations')"))


def prompt_tokens(srv, messages, key=None):
    """The server's own count of a chat prompt (/tokenize, vLLM's shape)."""
    r = srv.post("/tokenize", {"messages": messages, "add_generation_prompt": True}, headers=srv.headers(key) or None)
    assert r.status_code == 200, r.text
    return r.json()["count"]


def test_streams_replies_with_their_numbers_and_stops_a_long_one(browser, server, build_dir):
    from selenium.webdriver.common.keys import Keys

    name = served_name(server)
    open_page(browser, server, name)
    system = "You are a careful assistant. Answer in a few plain sentences, and say when you do not know something."
    set_value(browser, "system-prompt", system)
    set_value(browser, "temperature", 0.8)
    set_value(browser, "top-p", 0.9)
    set_value(browser, "max-tokens", 12)
    css(browser, "#ignore-eos")[0].click()

    # The request carries the system prompt and the whole conversation: the
    # page's prompt count is the server's count of exactly those messages.
    question = "Hello! What can you tell me about paged attention?"
    first = send_and_wait(browser, question)
    assert first["tokens"] == 12 and first["finish"] == "length", first
    # No rate here: the tiny model's 12 tokens can all arrive in one read, and
    # then the page has no time between the first and the last to divide by
    # (it shows none). The long reply below, streamed for a second, has one.
    assert first["ttft_ms"] >= 0 and first["cached"] == 0, first
    history = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    assert first["prompt"] == prompt_tokens(server, history), first
    second = send_and_wait(browser, "And how does the prefix cache help?")
    stored = stored_conversations(browser)[0]["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
    history += [{"role": m["role"], "content": m["content"]} for m in stored[1:3]]
    assert second["prompt"] == prompt_tokens(server, history), second

    # The same question in a new conversation: the server's prefix cache holds
    # its blocks, and the page shows what the server counted.
    css(browser, "#new-chat")[0].click()
    hits = server.metrics()["vllm:prefix_cache_hits_total"]
    again = send_and_wait(browser, question)
    assert again["prompt"] == first["prompt"] and 0 < again["cached"] < again["prompt"], again
    assert again["cached"] == server.metrics()["vllm:prefix_cache_hits_total"] - hits, again

    # A long reply, watched as it grows, stopped mid-way.
    long_reply = MAX_MODEL_LEN - 512
    set_value(browser, "max-tokens", long_reply)
    browser.execute_script("""
        window.__lengths = [];
        new MutationObserver(() => {
            const replies = document.querySelectorAll('#messages .msg.assistant .content');
            window.__lengths.push(replies[replies.length - 1].textContent.length);
        }).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});
    """)
    aborted = abort_count(server)
    css(browser, "#input")[0].send_keys("Now tell me a very long story." + Keys.ENTER)
    wait(browser, lambda: len(set(browser.execute_script("return window.__lengths"))) >= 6,
         "a streamed reply (the reply's text changing in the page several times)")
    assert server.metrics()["vllm:num_requests_running"] == 1
    assert not css(browser, "#stop")[0].get_attribute("disabled")
    css(browser, "#stop")[0].click()
    wait(browser, lambda: len(css(browser, "#messages .msg.assistant .stats")) == 2, "the stopped reply's numbers")
    stopped = parse_stats(assistant_replies(browser)[-1])
    assert stopped["finish"] == "stopped" and 0 < stopped["tokens"] < long_reply, stopped
    assert stopped["tokens_per_s"] > 0, stopped
    # The stopped reply is kept: every piece that came (each one at least a character).
    shown = stored_conversations(browser)[0]["messages"][-1]
    assert shown["role"] == "assistant" and len(shown["content"]) >= stopped["tokens"] > 0, shown

    deadline = time.time() + 10
    while time.time() < deadline:
        m = server.metrics()
        if m["vllm:num_requests_running"] == 0 and m["cllm:kv_cache_blocks_used"] == 0:
            break
        time.sleep(0.05)
    m = server.metrics()
    assert m["vllm:num_requests_running"] == 0 and m["vllm:num_requests_waiting"] == 0
    assert m["cllm:kv_cache_blocks_used"] == 0, "the stopped request's KV blocks went back to the pool"
    assert abort_count(server) == aborted + 1
    assert css(browser, "#stop")[0].get_attribute("disabled") and not css(browser, "#send")[0].get_attribute("disabled")

    artifacts = build_dir / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(artifacts / "webui.png"))

    # The conversations and the settings survive a reload (localStorage).
    browser.refresh()
    wait(browser, lambda: len(css(browser, "#messages .msg")) == 4, "the conversation after a reload")
    assert [parse_stats(r)["finish"] for r in assistant_replies(browser)] == ["length", "stopped"]
    assert css(browser, "#max-tokens")[0].get_attribute("value") == str(long_reply)
    assert css(browser, "#system-prompt")[0].get_attribute("value") == system
    assert css(browser, "#ignore-eos")[0].is_selected()
    assert len(css(browser, "#conversations li")) == 2
    css(browser, "#conversations li.current .delete")[0].click()
    wait(browser, lambda: len(css(browser, "#conversations li")) == 1 and len(css(browser, "#messages .msg")) == 4,
         "the first conversation, after deleting the second")
    assert [parse_stats(r)["finish"] for r in assistant_replies(browser)] == ["length", "length"]
    assert len(stored_conversations(browser)) == 1


def test_markdown_and_code_are_rendered_and_html_is_not_run(browser, server):
    open_page(browser, server, served_name(server))
    reply = ("Some **bold** text and `inline` code.\n\n```python\ndef f(x):\n    return x + 1\n```\n\n"
             "<img src=x onerror=\"window.__ran = 1\"> <script>window.__ran = 2</script>\n\n"
             "[ok](https://example.com/) [bad](javascript:window.__ran=3)")
    conversation = {"id": "md", "title": "markdown", "messages": [
        {"role": "user", "content": "<b>not bold</b>"},
        {"role": "assistant", "content": reply}]}
    browser.execute_script("localStorage.setItem('cllm.conversations', arguments[0]);"
                           "localStorage.setItem('cllm.current', '\"md\"');", json.dumps([conversation]))
    browser.refresh()
    wait(browser, lambda: len(css(browser, "#messages .msg")) == 2, "the stored conversation")
    assert css(browser, "#messages .msg.user")[0].text == "<b>not bold</b>"
    content = "#messages .msg.assistant .content"
    assert css(browser, content + " strong")[0].text == "bold"
    assert css(browser, content + " p code")[0].text == "inline"
    code = css(browser, content + " pre code.hljs.language-python")
    assert code and "def f(x):" in code[0].text
    assert css(browser, content + " pre code .hljs-keyword")[0].text == "def"
    assert not css(browser, content + " img") and not css(browser, content + " script")
    assert "<img src=x" in css(browser, content)[0].text
    links = css(browser, content + " a")
    assert [a.get_attribute("href") for a in links] == ["https://example.com/"]
    assert browser.execute_script("return window.__ran") is None


def test_asks_for_the_api_key_once_and_sends_it(browser, cllm_bin, model_factory):
    key = "sk-browser-test"
    with CllmServer(cllm_bin, tiny_model(model_factory), "--kv-cache-memory", "16MiB", api_key=key) as srv:
        name = served_name(srv, key)
        browser.get(srv.url("/"))
        wait(browser, lambda: css(browser, "#key-dialog")[0].get_attribute("open") is not None,
             "the API key dialog after the first 401")
        assert "needs an API key" in css(browser, "#key-message")[0].text
        css(browser, "#key-input")[0].send_keys(key)
        css(browser, "#key-save")[0].click()
        wait(browser, lambda: css(browser, "#model-name")[0].text == name, "the model's name once the key is given")
        assert browser.execute_script("return localStorage.getItem('cllm.apiKey')") == key
        set_value(browser, "max-tokens", 6)
        reply = send_and_wait(browser, "Hello with a key")
        assert 0 < reply["tokens"] <= 6 and reply["finish"] in ("length", "stop"), reply
        assert not css(browser, "#messages .msg .error")

        # A request the server refuses: its message under the reply, and the
        # page (and the server) carry on.
        set_value(browser, "max-tokens", 10**9)
        refused = send_and_wait(browser, "Too long a reply")
        errors = css(browser, "#messages .msg.assistant .error")
        assert len(errors) == 1 and errors[0].text.startswith("400: "), [e.text for e in errors]
        assert "maximum context length is 4096 tokens" in errors[0].text and refused["tokens"] == 0
        # The failed exchange is left out of the next request.
        set_value(browser, "max-tokens", 6)
        again = send_and_wait(browser, "Hello again")
        assert 0 < again["tokens"] <= 6
        stored = stored_conversations(browser)[0]["messages"]
        sent = [{"role": m["role"], "content": m["content"]} for m in stored[:2] + stored[4:5]]
        assert again["prompt"] == prompt_tokens(srv, sent, key)

        # Kept: a reload asks nothing.
        browser.refresh()
        wait(browser, lambda: css(browser, "#model-name")[0].text == name, "the model's name after a reload")
        assert css(browser, "#key-dialog")[0].get_attribute("open") is None

        # A refused key is asked for again.
        browser.execute_script("localStorage.setItem('cllm.apiKey', 'sk-wrong')")
        browser.refresh()
        wait(browser, lambda: css(browser, "#key-dialog")[0].get_attribute("open") is not None,
             "the API key dialog after the key was refused")
        assert "refused" in css(browser, "#key-message")[0].text
        css(browser, "#key-input")[0].send_keys(key)
        css(browser, "#key-save")[0].click()
        wait(browser, lambda: css(browser, "#model-name")[0].text == name, "the model's name with the key again")


def test_page_chats_with_the_first_generative_model(browser, cllm_bin, model_factory):
    """An embedding model listed first (task "embed" in /v1/models) is not the one the page chats with."""
    import contextlib
    import io
    from pathlib import Path

    with contextlib.redirect_stdout(io.StringIO()):  # the package prints a line on import
        import all_minilm_l6_v2
        minilm = Path(all_minilm_l6_v2.get_model_path())
    with CllmServer(cllm_bin, minilm, "--model", tiny_model(model_factory), "--served-model-name", "embedder",
                    "--served-model-name", "chatter", "--kv-cache-memory", "16MiB") as srv:
        open_page(browser, srv, "chatter")


def test_the_default_model_answers_in_the_page(browser, cllm_bin):
    """`make run`'s model, served as `make run` serves it: a question typed in the
    page gets a streamed answer (the reply's text grows in several steps) that
    holds what was asked for."""
    with CllmServer(cllm_bin, default_chat_model()) as srv:
        open_page(browser, srv, served_name(srv))
        browser.execute_script("""
            window.__lengths = [];
            new MutationObserver(() => {
                const replies = document.querySelectorAll('#messages .msg.assistant .content');
                if (replies.length) window.__lengths.push(replies[replies.length - 1].textContent.length);
            }).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});
        """)
        stats = send_and_wait(browser, "What is the capital of France? Answer in one sentence.")
        reply = assistant_replies(browser)[-1].text
        assert "Paris" in reply and stats["finish"] in (None, "stop"), (reply, stats)
        assert len(set(browser.execute_script("return window.__lengths"))) >= 3, "the answer was not streamed"
