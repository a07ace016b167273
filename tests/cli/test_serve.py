#!/usr/bin/env python3
"""`lmc serve` over HTTP with the shipped model (kjv-llama-11m-4bit): the
endpoints and their OpenAI shapes, streaming (the reassembled chunks equal the
non-streamed text at temperature 0), stop strings, usage, every kind of bad
input (an OpenAI error object and a 4xx, and the server still answers), the
bounded queue (503 + Retry-After), a client that disconnects mid-stream (its
generation stops and frees the model), the prompt cache across a 5-turn chat
(the /metrics prefill counter grows by each turn's new tokens only), and
graceful shutdown on SIGTERM / SIGINT (exit 0).

Environment (set by ctest): LMC_CLI (build/lmc), LMC_SOURCE_DIR."""
import json
import os
import signal
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, __import__("os").path.dirname(__file__))
from serve_util import Server, sse_events  # noqa: E402

CHAT = "/v1/chat/completions"
COMPL = "/v1/completions"
Q = [{"role": "user", "content": "Who was Moses?"}]


def chat(messages=Q, **kw):
    return dict({"model": "kjv:11m", "messages": messages, "temperature": 0, "max_tokens": 24}, **kw)


class ServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--max-body", "65536", "--timeout", "3", "--threads", "1").start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        assert rc == 0, "exit %d: %s" % (rc, "".join(cls.srv.lines))

    def error(self, path, body, status, code=None, param=None, **kw):
        st, headers, data = (self.srv.post(path, body, **kw) if not isinstance(body, bytes) else
                             self.srv.request("POST", path, body, **kw))
        if isinstance(data, bytes):
            data = json.loads(data)
        self.assertEqual(st, status, data)
        self.assertEqual(headers["content-type"], "application/json")
        e = data["error"]
        self.assertTrue(e["message"])
        self.assertIn("type", e)
        if code is not None:
            self.assertEqual(e["code"], code, e)
        if param is not None:
            self.assertEqual(e["param"], param, e)
        return e

    # ---- the endpoints ----
    def test_models_health(self):
        st, _, data = self.srv.get("/v1/models")
        self.assertEqual(st, 200)
        models = json.loads(data)
        self.assertEqual(models["object"], "list")
        self.assertEqual(models["data"][0]["id"], "kjv:11m")
        self.assertEqual(models["data"][0]["object"], "model")
        st, _, data = self.srv.get("/v1/models/kjv:11m")
        self.assertEqual((st, json.loads(data)["id"]), (200, "kjv:11m"))
        self.assertEqual(self.srv.get("/v1/models/gpt-4")[0], 404)
        st, _, data = self.srv.get("/health")
        self.assertEqual((st, json.loads(data)), (200, {"status": "ok"}))

    def test_chat(self):
        st, _, r = self.srv.post(CHAT, chat())
        self.assertEqual(st, 200, r)
        self.assertEqual(r["object"], "chat.completion")
        self.assertTrue(r["id"].startswith("chatcmpl-"))
        c = r["choices"][0]
        self.assertEqual(c["message"]["role"], "assistant")
        self.assertTrue(c["message"]["content"])
        self.assertIn(c["finish_reason"], ("stop", "length"))
        u = r["usage"]
        self.assertEqual(u["total_tokens"], u["prompt_tokens"] + u["completion_tokens"])
        # the prompt's tokens: BOS <|user|> \n Who was Moses? <|end|> \n <|assistant|> \n
        st, _, t = self.srv.post("/tokenize", {"content": "<s><|user|>\nWho was Moses?<|end|>\n"
                                                          "<|assistant|>\n"})
        self.assertEqual(u["prompt_tokens"], len(t["tokens"]))
        self.assertLessEqual(u["completion_tokens"], 24)
        # the model may be named by its folder, or not at all
        self.assertEqual(self.srv.post(CHAT, chat(model="kjv-llama-11m-4bit"))[0], 200)
        body = chat()
        del body["model"]
        st, _, r2 = self.srv.post(CHAT, body)
        self.assertEqual(r2["choices"][0]["message"], c["message"])  # temperature 0

    def test_stream_equals_non_stream(self):
        for path, body in ((CHAT, chat(max_tokens=40)),
                           (COMPL, {"prompt": "And God said,", "temperature": 0, "max_tokens": 40})):
            st, _, full = self.srv.post(path, body)
            self.assertEqual(st, 200)
            st, headers, data = self.srv.request(
                "POST", path, dict(body, stream=True, stream_options={"include_usage": True}))
            self.assertEqual(st, 200)
            self.assertTrue(headers["content-type"].startswith("text/event-stream"))
            events = sse_events(data)
            self.assertEqual(events[-1], "[DONE]")
            chunks = [json.loads(e) for e in events[:-1]]
            usage = chunks[-1]
            self.assertEqual(usage["choices"], [])
            self.assertEqual(usage["usage"], full["usage"] | {"prompt_tokens_details": usage["usage"]["prompt_tokens_details"]})
            final = chunks[-2]["choices"][0]
            self.assertEqual(final["finish_reason"], full["choices"][0]["finish_reason"])
            if path == CHAT:
                self.assertEqual(chunks[0]["choices"][0]["delta"]["role"], "assistant")
                text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
                self.assertEqual(text, full["choices"][0]["message"]["content"])
                self.assertEqual({c["object"] for c in chunks}, {"chat.completion.chunk"})
            else:
                text = "".join(c["choices"][0]["text"] for c in chunks[:-1])
                self.assertEqual(text, full["choices"][0]["text"])
            self.assertEqual(len({c["id"] for c in chunks}), 1)
            # without include_usage: no usage chunk, no usage fields
            st, _, data = self.srv.request("POST", path, dict(body, stream=True))
            chunks = [json.loads(e) for e in sse_events(data)[:-1]]
            self.assertTrue(all("usage" not in c for c in chunks))
            self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], final["finish_reason"])

    def test_stop_strings(self):
        st, _, full = self.srv.post(CHAT, chat(max_tokens=40))
        text = full["choices"][0]["message"]["content"]
        self.assertIn(" said", text)
        for stop in (" said", [" said", "zzz"]):
            st, _, r = self.srv.post(CHAT, chat(max_tokens=40, stop=stop))
            self.assertEqual(r["choices"][0]["message"]["content"], text[:text.index(" said")])
            self.assertEqual(r["choices"][0]["finish_reason"], "stop")

    def test_completions_prompt_forms(self):
        base = {"temperature": 0, "max_tokens": 8}
        st, _, a = self.srv.post(COMPL, dict(base, prompt="In the beginning"))
        self.assertEqual(st, 200)
        self.assertEqual(a["object"], "text_completion")
        st, _, b = self.srv.post(COMPL, dict(base, prompt=["In the beginning"]))
        self.assertEqual(a["choices"][0]["text"], b["choices"][0]["text"])
        st, _, t = self.srv.post("/tokenize", {"content": "In the beginning", "add_special": True})
        st, _, c = self.srv.post(COMPL, dict(base, prompt=t["tokens"]))
        self.assertEqual(a["choices"][0]["text"], c["choices"][0]["text"])
        st, _, d = self.srv.post(COMPL, dict(base, prompt=[t["tokens"]]))
        self.assertEqual(a["choices"][0]["text"], d["choices"][0]["text"])

    def test_sampling_fields(self):
        body = chat(temperature=0.9, top_p=0.9, top_k=40, min_p=0.05, repetition_penalty=1.1,
                    presence_penalty=0.5, frequency_penalty=0.5, seed=7, n=1,
                    logit_bias={"5": -100}, max_completion_tokens=16, user="me",
                    stream_options=None, tools=None)
        st, _, a = self.srv.post(CHAT, body)
        self.assertEqual(st, 200, a)
        st, _, b = self.srv.post(CHAT, body)
        self.assertEqual(a["choices"][0]["message"], b["choices"][0]["message"])  # the seed
        self.assertLessEqual(a["usage"]["completion_tokens"], 16)
        # logit_bias +100 on one token makes it the only one
        st, _, t = self.srv.post("/tokenize", {"content": " LORD"})
        tok = t["tokens"][0]
        st, _, r = self.srv.post(CHAT, chat(logit_bias={str(tok): 100}, max_tokens=4))
        self.assertEqual(r["choices"][0]["message"]["content"], " LORD" * 4)

    def test_tokenize_detokenize(self):
        st, _, t = self.srv.post("/tokenize", {"content": "And God said"})
        self.assertEqual(st, 200)
        st, _, d = self.srv.post("/detokenize", {"tokens": t["tokens"]})
        self.assertEqual(d["content"], "And God said")
        self.error("/tokenize", {"content": 5}, 400, "invalid_type", "content")
        self.error("/detokenize", {"tokens": [1, -1]}, 400, "invalid_value", "tokens")
        self.error("/detokenize", {"tokens": "1"}, 400, "invalid_type", "tokens")

    def test_metrics(self):
        self.srv.post(CHAT, chat(max_tokens=4))
        st, headers, data = self.srv.get("/metrics")
        self.assertEqual(st, 200)
        self.assertTrue(headers["content-type"].startswith("text/plain"))
        text = data.decode()
        for name in ("lmc_http_requests_total", "lmc_http_request_duration_seconds_bucket",
                     "lmc_prompt_tokens_total", "lmc_prefill_tokens_total",
                     "lmc_generated_tokens_total", "lmc_queue_depth", "lmc_queue_wait_seconds_bucket",
                     "lmc_time_to_first_token_seconds_count", "lmc_prompt_cache_bytes"):
            self.assertIn(name, text)
        m = self.srv.metrics()
        self.assertGreater(m['lmc_http_requests_total{path="/v1/chat/completions",code="2xx"}'], 0)
        self.assertEqual(m["lmc_queue_depth"], 0)
        self.assertGreater(m["lmc_prompt_cache_bytes"], 0)

    # ---- bad input ----
    def test_malformed_json(self):
        for body in (b"{", b"{\"messages\": [}", b"null", b"[]", b"\"x\"", b"", b"{} {}",
                     b'{"messages": [], "messages": []}'):
            self.error(CHAT, body, 400)
        self.error(CHAT, b"{", 400, "invalid_json")

    def test_wrong_types(self):
        cases = [
            ({"messages": "hi"}, "messages"), ({"messages": [1]}, "messages[0]"),
            ({"messages": [{"role": 1, "content": "x"}]}, "messages[0].role"),
            ({"messages": [{"role": "user", "content": 1}]}, "messages[0].content"),
            ({"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]},
             "messages[0].content[0].text"),
            (chat(max_tokens="16"), "max_tokens"), (chat(max_tokens=1.5), "max_tokens"),
            (chat(temperature="0"), "temperature"), (chat(top_p=[1]), "top_p"),
            (chat(stop=5), "stop"), (chat(stop=["a", 5]), "stop"), (chat(seed="1"), "seed"),
            (chat(logit_bias=[]), "logit_bias"), (chat(logit_bias={"5": "x"}), "logit_bias"),
            (chat(stream="yes"), "stream"), (chat(stream=True, stream_options=1), "stream_options"),
            (chat(stream=True, stream_options={"include_usage": 1}), "stream_options.include_usage"),
            (chat(top_k=1.5), "top_k"), (chat(min_p="0"), "min_p"), (chat(model=5), "model"),
            (chat(presence_penalty={}), "presence_penalty"), (chat(n="1"), "n"),
            # fields of OpenAI's API that lmc does not use are still type-checked
            (chat(user=5), "user"), (chat(tools={}), "tools"), (chat(logprobs=1), "logprobs"),
            (chat(response_format="json"), "response_format"), (chat(store="no"), "store"),
        ]
        for body, param in cases:
            with self.subTest(body=body):
                self.error(CHAT, body, 400, param=param)
        self.error(COMPL, {"prompt": 5}, 400, param="prompt")
        self.error(COMPL, {"prompt": [1, "a"]}, 400, param="prompt")
        self.error(COMPL, {"prompt": "x", "echo": 1}, 400, param="echo")
        # unknown fields are ignored whatever their type
        self.assertEqual(self.srv.post(CHAT, chat(max_tokens=2, zzz={"a": [1]}))[0], 200)

    def test_bad_values(self):
        cases = [
            (chat(messages=[]), "messages"), ({"model": "kjv:11m"}, "messages"),
            (chat(messages=[{"role": "wizard", "content": "x"}]), "messages[0].role"),
            (chat(messages=[{"role": "user"}]), "messages[0].content"),
            (chat(messages=[{"role": "user", "content": [{"type": "image_url"}]}]),
             "messages[0].content[0]"),
            (chat(n=2), "n"), (chat(max_tokens=0), "max_tokens"), (chat(max_tokens=-1), "max_tokens"),
            (chat(temperature=2.5), "temperature"), (chat(temperature=-1), "temperature"),
            (chat(top_p=1.5), "top_p"), (chat(presence_penalty=3), "presence_penalty"),
            (chat(frequency_penalty=-3), "frequency_penalty"), (chat(min_p=2), "min_p"),
            (chat(repetition_penalty=0), "repetition_penalty"), (chat(top_k=-2), "top_k"),
            (chat(stop=[""]), "stop"), (chat(stop=["a"] * 17), "stop"),
            (chat(logit_bias={"x": 1}), "logit_bias"), (chat(logit_bias={"99999999": 1}), "logit_bias"),
            (chat(logit_bias={"5": 101}), "logit_bias"), (chat(stream_options={"include_usage": True}),
                                                          "stream_options"),
            (chat(logprobs=True), "logprobs"), (chat(response_format={"type": "json_object"}),
                                                "response_format"),
        ]
        for body, param in cases:
            with self.subTest(body=body):
                self.error(CHAT, body, 400, param=param)
        self.error(COMPL, {"prompt": ["a", "b"]}, 400, param="prompt")
        self.error(COMPL, {"prompt": [1, 99999999]}, 400, param="prompt")
        self.error(COMPL, {"prompt": []}, 400, param="prompt")
        self.error(COMPL, {}, 400, "missing_required_parameter", "prompt")
        self.error(COMPL, {"prompt": "x", "best_of": 2}, 400, param="best_of")
        # the template refuses the tool role: a 400 with its message, not a crash
        e = self.error(CHAT, chat(messages=[{"role": "tool", "content": "x"}]), 400)
        self.assertIn("roles", e["message"])

    def test_unknown_model(self):
        e = self.error(CHAT, chat(model="gpt-4o"), 404, "model_not_found", "model")
        self.assertIn("gpt-4o", e["message"])
        self.error(COMPL, {"model": "nope", "prompt": "x"}, 404, "model_not_found")

    def test_context_too_long(self):
        long_text = "And God said, Let there be light. " * 200  # > 1024 tokens
        e = self.error(CHAT, chat(messages=[{"role": "user", "content": long_text}]), 400,
                       "context_length_exceeded", "messages")
        self.assertIn("1024", e["message"])
        self.error(COMPL, {"prompt": long_text}, 400, "context_length_exceeded", "prompt")
        self.error(CHAT, chat(messages=[{"role": "user", "content": long_text}], stream=True), 400,
                   "context_length_exceeded")

    def test_invalid_utf8(self):
        body = b'{"messages": [{"role": "user", "content": "caf\xc3"}]}'
        self.error(CHAT, body, 400, "invalid_utf8")
        self.error(CHAT, b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', 400,
                   "invalid_utf8")
        # surrogate escapes and NUL are refused by the JSON parser
        self.error(CHAT, b'{"messages": [{"role": "user", "content": "\\ud800"}]}', 400)
        self.error(CHAT, b'{"messages": [{"role": "user", "content": "a\\u0000b"}]}', 400)
        self.error("/tokenize", b'{"content": "\xc0\x80"}', 400, "invalid_utf8")

    def test_body_over_limit(self):
        big = json.dumps(chat(messages=[{"role": "user", "content": "x" * 70000}]))
        self.error(CHAT, big, 413, "request_too_large")
        # the same in chunks, without a Content-Length
        body = big.encode()
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 8192]), body[i:i + 8192])
                          for i in range(0, len(body), 8192))
        got = self.srv.raw(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                           b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunks +
                           b"0\r\n\r\n")
        self.assertTrue(got.startswith(b"HTTP/1.1 413"), got[:200])
        self.assertIn(b'"request_too_large"', got)
        # a flood far past the limit is cut off (connection closed), not read forever
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=10)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        t0, sent = time.time(), 0
        try:
            while time.time() - t0 < 10:
                s.sendall(b"10000\r\n" + b"x" * 0x10000 + b"\r\n")
                sent += 0x10000
        except OSError:
            pass
        s.close()
        self.assertLess(sent, 64 << 20)
        self.assertEqual(self.srv.get("/health")[0], 200)

    def test_chunked_body_never_ends(self):
        # a chunked body that stalls: the connection is cut after --timeout (3 s)
        t0 = time.time()
        got = self.srv.raw(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"mes\r\n", timeout=20)
        self.assertLess(time.time() - t0, 10)
        self.assertFalse(got.startswith(b"HTTP/1.1 200"))
        # one that trickles on forever: cut when the body's deadline passes
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=20)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        t0 = time.time()
        closed = False
        while time.time() - t0 < 15:
            try:
                s.sendall(b"1\r\n \r\n")
                time.sleep(0.5)
            except OSError:
                closed = True
                break
        s.close()
        self.assertTrue(closed)
        self.assertLess(time.time() - t0, 10)
        # and a stalled Content-Length body
        t0 = time.time()
        got = self.srv.raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{",
                           timeout=20)
        self.assertLess(time.time() - t0, 10)
        self.assertEqual(self.srv.get("/health")[0], 200)

    def test_not_found_and_methods(self):
        st, _, data = self.srv.get("/v1/nothing")
        self.assertEqual(st, 404)
        self.assertEqual(json.loads(data)["error"]["code"], "unknown_url")
        st, headers, data = self.srv.get(CHAT)
        self.assertEqual(st, 405)
        self.assertEqual(headers["allow"], "POST")
        self.assertEqual(self.srv.request("POST", "/health", b"{}")[0], 405)

    # ---- concurrency ----
    def test_concurrent_requests(self):
        results = []

        def one(i):
            results.append(self.srv.post(COMPL, {"prompt": "And %d" % i, "temperature": 0,
                                                 "max_tokens": 16}))
        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual([r[0] for r in results], [200] * 8)


class QueueTest(unittest.TestCase):
    """--queue 0: one generation at a time, the next one gets 503 with Retry-After."""

    def test_queue_full_and_disconnect(self):
        with Server("--queue", "0", "--threads", "1") as srv:
            long_body = {"prompt": "And", "temperature": 0, "max_tokens": 1000, "stream": True,
                         "logit_bias": {"1": -100, "6": -100}}
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            body = json.dumps(long_body).encode()
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                      b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            first = s.recv(4096)
            self.assertIn(b"200 OK", first)
            st, headers, data = srv.post(CHAT, chat(max_tokens=4))
            self.assertEqual(st, 503, data)
            self.assertEqual(headers["retry-after"], "1")
            self.assertEqual(data["error"]["code"], "queue_full")
            # the client goes away mid-stream: its generation stops at once
            s.close()
            deadline = time.time() + 10
            while time.time() < deadline:
                m = srv.metrics()
                if m["lmc_requests_cancelled_total"] >= 1 and m["lmc_requests_running"] == 0:
                    break
                time.sleep(0.05)
            self.assertEqual(m["lmc_requests_cancelled_total"], 1)
            self.assertLess(m["lmc_generated_tokens_total"], 1000)
            # and its place is free again
            st, _, data = srv.post(CHAT, chat(max_tokens=4))
            self.assertEqual(st, 200, data)
            self.assertGreaterEqual(srv.metrics()["lmc_requests_rejected_total"], 1)


    def test_disconnect_while_queued(self):
        """A waiting request whose client goes away leaves the queue at once."""
        with Server("--queue", "1", "--threads", "1") as srv:
            body = json.dumps({"prompt": "And", "temperature": 0, "max_tokens": 1000, "stream": True,
                               "logit_bias": {"1": -100, "6": -100}}).encode()
            a = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            a.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body))
            self.assertIn(b"200 OK", a.recv(4096))
            small = json.dumps(chat(max_tokens=4)).encode()
            b = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            b.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(small), small))
            deadline = time.time() + 5
            while srv.metrics()["lmc_queue_depth"] != 1 and time.time() < deadline:
                time.sleep(0.01)
            b.close()
            deadline = time.time() + 5
            while (m := srv.metrics())["lmc_queue_depth"] != 0 and time.time() < deadline:
                time.sleep(0.01)
            self.assertEqual(m["lmc_queue_depth"], 0)
            self.assertGreaterEqual(m["lmc_requests_cancelled_total"], 1)
            a.close()
            st, _, data = srv.post(CHAT, chat(max_tokens=4))
            self.assertEqual(st, 200, data)
            # the one that went away never ran: A, and the last one
            self.assertEqual(srv.metrics()["lmc_generations_total"], 2)


class PromptCacheTest(unittest.TestCase):
    def test_five_turns(self):
        """Each turn computes only its new tokens: the previous prompt and reply are cached."""
        with Server("--threads", "1") as srv:
            messages = [{"role": "system", "content": "Answer as the scripture."}]
            questions = ["Who was Moses?", "And Aaron?", "What did the LORD say?",
                         "Where is Egypt?", "Amen."]
            prev_total = 0
            for i, q in enumerate(questions):
                messages.append({"role": "user", "content": q})
                before = srv.metrics()["lmc_prefill_tokens_total"]
                st, _, r = srv.post(CHAT, chat(messages=messages, max_tokens=20))
                self.assertEqual(st, 200, r)
                u = r["usage"]
                computed = srv.metrics()["lmc_prefill_tokens_total"] - before
                cached = u["prompt_tokens_details"]["cached_tokens"]
                self.assertEqual(computed, u["prompt_tokens"] - cached)
                if i == 0:
                    self.assertEqual(cached, 0)
                else:
                    # what the session held: the last prompt and reply; a reply cut by
                    # max_tokens ends with a token that was sampled but never run. New: the
                    # closing <|end|>, the user turn, the assistant header (and that token)
                    self.assertEqual(cached, prev_total - unrun, (i, u))
                    st, _, t = srv.post("/tokenize", {"content": "<|end|>\n<|user|>\n%s<|end|>\n"
                                                                 "<|assistant|>\n" % q})
                    self.assertEqual(computed, len(t["tokens"]) + unrun, (i, u))
                prev_total = u["prompt_tokens"] + u["completion_tokens"]
                unrun = 1 if r["choices"][0]["finish_reason"] == "length" else 0
                messages.append({"role": "assistant", "content": r["choices"][0]["message"]["content"]})
            m = srv.metrics()
            self.assertEqual(m["lmc_prompt_cache_sessions"], 1)

    def test_two_conversations_keep_their_caches(self):
        with Server("--threads", "1") as srv:
            a = [{"role": "user", "content": "Who was Moses?"}]
            b = [{"role": "user", "content": "Tell me of Noah and the ark."}]
            for turn in range(3):
                for conv in (a, b):
                    st, _, r = srv.post(CHAT, chat(messages=conv, max_tokens=12))
                    if turn > 0:
                        self.assertGreater(r["usage"]["prompt_tokens_details"]["cached_tokens"],
                                           r["usage"]["prompt_tokens"] // 2, (turn, r["usage"]))
                    conv.append({"role": "assistant", "content": r["choices"][0]["message"]["content"]})
                    conv.append({"role": "user", "content": "And then?"})
            self.assertEqual(srv.metrics()["lmc_prompt_cache_sessions"], 2)

    def test_memory_bound(self):
        # --cache-mb 1: sessions beyond the bound are dropped, least recently used first
        with Server("--threads", "1", "--cache-mb", "1") as srv:
            for i in range(4):
                srv.post(COMPL, {"prompt": "Conversation %d: And" % i, "temperature": 0,
                                 "max_tokens": 8})
            m = srv.metrics()
            self.assertEqual(m["lmc_prompt_cache_sessions"], 1)
            self.assertLessEqual(m["lmc_prompt_cache_bytes"], 2 << 20)


class AuthShutdownTest(unittest.TestCase):
    def test_api_key(self):
        with Server("--api-key", "sekrit") as srv:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "sekrit"},
                            {"Authorization": "Bearer sekrit2"}):
                st, h, data = srv.post(CHAT, chat(max_tokens=2), headers=headers)
                self.assertEqual(st, 401)
                self.assertEqual(data["error"]["code"], "invalid_api_key")
                self.assertEqual(h["www-authenticate"], "Bearer")
            self.assertEqual(srv.get("/v1/models")[0], 401)
            self.assertEqual(srv.get("/metrics")[0], 401)
            st, _, _ = srv.post(CHAT, chat(max_tokens=2), headers={"Authorization": "Bearer sekrit"})
            self.assertEqual(st, 200)

    def test_shutdown_mid_stream(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            srv = Server("--threads", "1", "--shutdown-timeout", "2").start()
            body = json.dumps({"prompt": "And", "temperature": 0, "max_tokens": 1000,
                               "stream": True, "logit_bias": {"1": -100, "6": -100}}).encode()
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body))
            self.assertIn(b"200 OK", s.recv(4096))
            t0 = time.time()
            rc = srv.stop(sig, timeout=20)
            self.assertEqual(rc, 0, "".join(srv.lines))
            self.assertLess(time.time() - t0, 10)
            self.assertIn("shutting down", "".join(srv.lines))
            s.close()
            # the port is closed
            with self.assertRaises(OSError):
                socket.create_connection(("127.0.0.1", srv.port), timeout=2)

    def test_shutdown_signal_on_another_thread(self):
        """A SIGTERM the kernel gives to a thread that does not block it
        (OpenBLAS starts its workers before lmc blocks the signals) still
        shuts down cleanly instead of ending the process there."""
        import ctypes
        nr = {"x86_64": 234, "aarch64": 131}.get(os.uname().machine)
        srv = Server("--threads", "1", env={"OPENBLAS_NUM_THREADS": "2"}).start()
        pid = srv.proc.pid
        takers = []
        for t in os.listdir("/proc/%d/task" % pid):
            if int(t) == pid:
                continue  # the main thread, in sigwait
            with open("/proc/%d/task/%s/status" % (pid, t)) as f:
                blk = [int(l.split()[1], 16) for l in f if l.startswith("SigBlk:")][0]
            if not blk & (1 << (signal.SIGTERM - 1)):
                takers.append(int(t))
        if not nr or not takers:
            srv.stop()
            self.skipTest("no thread here that takes SIGTERM, or no tgkill")
        libc = ctypes.CDLL(None, use_errno=True)
        self.assertEqual(libc.syscall(nr, pid, takers[0], int(signal.SIGTERM)), 0)
        rc = srv.stop(sig=None, timeout=20)
        self.assertEqual(rc, 0, "".join(srv.lines))
        self.assertIn("shutting down", "".join(srv.lines))

    def test_usage_errors(self):
        import subprocess
        from serve_util import LMC
        r = subprocess.run([LMC, "serve", "--port", "70000"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        r = subprocess.run([LMC, "serve", "--help"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0)
        self.assertIn("/v1/chat/completions", r.stdout)
        r = subprocess.run([LMC, "serve", "--model", "/nonexistent"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        with Server() as srv:  # the port is taken: a clear error, exit 1
            r = subprocess.run([LMC, "serve", "--port", str(srv.port)], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 1)
            self.assertIn("cannot listen", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
