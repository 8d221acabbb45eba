#!/usr/bin/env python3
"""Writes the hand-made seeds of fuzz/corpus/ from the project's test fixtures and formats.

Each seed starts with its target's header bytes (see the `// Bytes:` comment in
fuzz/fuzz_targets/<target>.rs). Rerun after a format change; the fuzzer's own findings are
merged in by scripts/fuzz-campaign.sh --merge (minimized with libFuzzer's -merge=1).
"""
import gzip, hashlib, io, json, os, re, struct, sys, tarfile

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
out = os.path.join(root, "fuzz", "corpus")

def put(target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)

j = lambda v: json.dumps(v, separators=(",", ":"))

# discord_gateway: frames of the Gateway v10 shapes the emulator sends.
msg = {"id": "900", "channel_id": "20", "guild_id": "10", "author": {"id": "5"},
       "content": "<@42> how are deliveries settled?", "mentions": [{"id": "42"}], "nonce": 7}
ask = {"id": "901", "application_id": "7", "type": 2, "channel_id": "21", "guild_id": "10",
       "member": {"user": {"id": "5"}}, "token": "tok.en-1",
       "data": {"name": "ask", "options": [{"type": 3, "name": "question", "value": "why?"}]}}
put("discord_gateway", "message", j({"op": 0, "s": 3, "t": "MESSAGE_CREATE", "d": msg}))
put("discord_gateway", "interaction", j({"op": 0, "s": 4, "t": "INTERACTION_CREATE", "d": ask}))
put("discord_gateway", "ready", j({"op": 0, "s": 1, "t": "READY", "d": {"session_id": "s", "user": {"id": "42"}, "application": {"id": "7"}, "resume_gateway_url": "wss://resume.example"}}))
put("discord_gateway", "hello", j({"op": 10, "d": {"heartbeat_interval": 41250}}))
put("discord_gateway", "dm", j({"op": 0, "s": 5, "t": "MESSAGE_CREATE", "d": dict(msg, guild_id=None)}))
put("discord_gateway", "url", "ws://127.0.0.1:9000/gw")

# discord_rest: status (2, BE), flags, body.
def rest(name, status, flags, body):
    put("discord_rest", name, struct.pack(">HB", status, flags) + (body if isinstance(body, bytes) else body.encode()))
rest("sent", 200, 0, j({"id": "1234", "content": "The answer.", "nonce": "n"}))
rest("ratelimit", 429, 2, "2.5\n" + j({"retry_after": 1.5, "global": True}))
rest("unknown-message", 404, 1, j({"code": 10008, "message": "Unknown Message"}))
rest("acknowledged", 400, 0, j({"code": 40060, "message": "Interaction has already been acknowledged."}))
rest("callback", 200, 0, j({"resource": {"message": {"id": "77", "content": "The answer."}}}))
rest("deferred", 200, 1, j({"id": "78", "content": "", "flags": 128}))
rest("page", 200, 0, j([dict(msg, author={"id": "42", "bot": True}, message_reference={"message_id": "900"})]))
rest("server", 503, 0, "upstream connect error")

# bounded_json: depth, items (2), read size, body.
def bj(name, depth, items, step, body):
    put("bounded_json", name, struct.pack(">BHB", depth, items, step) + body.encode())
bj("flat", 8, 100, 3, j({"a": [1, 2, 3], "b": "x\"]}", "c": {}}))
bj("deep", 4, 100, 0, "[" * 6 + "]" * 6)
bj("items", 8, 3, 7, j(list(range(10))))
bj("strings", 3, 50, 1, j({"k": "[[[[\\\"{{{{", "l": ["\\\\", "\u00e9"]}))

# bounded_sse: line bound (2), events bound, read size, stream.
def bs(name, line, events, step, body):
    put("bounded_sse", name, struct.pack(">HBB", line, events, step) + body.encode())
chunk = lambda c, f=None: j({"id": "c1", "object": "chat.completion.chunk", "model": "reach-test-model", "choices": [{"index": 0, "delta": {"content": c} if c is not None else {}, "finish_reason": f}]})
stream = "".join(f"data: {chunk(c)}\n\n" for c in ["The ", "answer [1]."]) + f"data: {chunk(None, 'stop')}\n\n" + "data: [DONE]\n\n"
bs("stream", 400, 10, 5, stream)
bs("fields", 64, 4, 0, ": comment\r\nevent: x\r\nid: 1\r\ndata: a\r\ndata: b\r\n\r\nretry: 3\n\n")
bs("long", 8, 2, 2, "data: 0123456789\n\n")

# bounded_body: flags, repeat (2), expanded KiB (2), ratio, read size, body.
def bb(name, flags, repeat, kib, ratio, step, body):
    put("bounded_body", name, struct.pack(">BHHBB", flags, repeat, kib, ratio, step) + body)
bb("identity", 0, 0, 64, 20, 1, b'{"ok": true, "text": "a plain body"}')
bb("gzip-here", 3, 200, 512, 20, 2, b"all work and no play ")
bb("bomb", 3, 2047, 64, 5, 0, b"\0" * 64)
bb("gzip-wire", 1, 0, 64, 20, 0, gzip.compress(b"a gzip body from the wire", mtime=0))
bb("bad-gzip", 1, 0, 64, 20, 0, b"\x1f\x8b\x08\x00garbage")

# portal_return: mode, body (the model emulator's shapes).
completion = {"id": "chatcmpl-1", "object": "chat.completion", "model": "reach-test-model",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "Deliveries settle once [1]."}, "finish_reason": "stop"}]}
put("portal_return", "completion", b"\0" + j(completion).encode())
put("portal_return", "stream", b"\1" + stream.encode())
put("portal_return", "return", b"\2" + j({"schema": "reach.portal.return/1", "id": "chatcmpl-1", "model": "reach-test-model-2024-08-06", "content": "See [2] and [1].", "finish_reason": "stop", "complete": True, "streamed": False}).encode())
put("portal_return", "length", b"\0" + j(dict(completion, choices=[dict(completion["choices"][0], finish_reason="length")])).encode())

# intercom_answer: status (2, BE), body (A2A 1.0 JSON-RPC).
def ia(name, status, body):
    put("intercom_answer", name, struct.pack(">H", status) + body.encode())
task = lambda state, rpc: j({"jsonrpc": "2.0", "id": rpc, "result": {"task": {"id": "remote-1", "contextId": "c", "status": {"state": state}, "artifacts": [{"artifactId": "a1", "parts": [{"text": "The answer.", "mediaType": "text/plain"}]}]}}})
ia("send-working", 200, task("TASK_STATE_WORKING", "task-1/send"))
ia("send-completed", 200, task("TASK_STATE_COMPLETED", "task-1/send"))
poll = lambda state: j({"jsonrpc": "2.0", "id": "task-1/poll/1", "result": {"id": "remote-1", "status": {"state": state, "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "no"}]}}}})
ia("poll-completed", 200, poll("TASK_STATE_COMPLETED"))
ia("poll-rejected", 200, poll("TASK_STATE_REJECTED"))
ia("not-found", 200, j({"jsonrpc": "2.0", "id": "task-1/poll/1", "error": {"code": -32001, "message": "Task not found"}}))
ia("message", 200, j({"jsonrpc": "2.0", "id": "task-1/send", "result": {"message": {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}}}))
ia("overloaded", 503, "")

# intercom_receipt: form (0 JSON, 1 TOML), the receipt.
rc = lambda name, form, doc: put("intercom_receipt", name, bytes([form]) + doc.encode())
rc("resend", 0, j({"peer": "https://peer.test/a2a", "binding": "a2a/1.0 jsonrpc", "resend": {"kind": "same-message-resolves-to-original-task", "max_resends": 2}}))
rc("none", 0, j({"peer": "https://peer.test/a2a", "binding": "a2a/1.0 jsonrpc", "resend": {"kind": "none"}}))
rc("bare", 0, j({"peer": "https://peer.test/a2a", "binding": "a2a/1.0 jsonrpc"}))
rc("dedup", 0, j({"peer": "https://peer.test/a2a", "binding": "a2a/1.0 jsonrpc", "dedup": True}))
rc("toml", 1, 'peer = "https://peer.test/a2a"\nbinding = "a2a/1.0 jsonrpc"\n[resend]\nkind = "same-message-resolves-to-original-task"\nmax_resends = 1\n')
rc("toml-old", 1, 'peer = "https://peer.test/a2a"\nbinding = "a2a/0.3 jsonrpc"\n')

# corpus_archive: mode, archive.
def targz(entries):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data, kind in entries:
            i = tarfile.TarInfo(name)
            i.mtime = 0
            if kind == "sym":
                i.type = tarfile.SYMTYPE; i.linkname = data.decode()
                t.addfile(i)
            else:
                i.size = len(data)
                t.addfile(i, io.BytesIO(data))
    return gzip.compress(b.getvalue(), mtime=0)
put("corpus_archive", "docs", b"\0" + targz([("docs/a.md", b"# Title\n\nSome text.\n\n## Part\n\nMore <b>text</b>.\n", "f"), ("docs/b.html", b"<html><body><h1>H</h1><p>p</p></body></html>", "f"), ("README.txt", b"plain\n", "f")]))
put("corpus_archive", "hostile", b"\0" + targz([("../escape.md", b"x", "f"), ("docs/link.md", b"../../etc/passwd", "sym"), (".git/hooks/post-checkout", b"#!/bin/sh\n", "f"), (".gitattributes", b"*.md filter=lfs\n", "f")]))
put("corpus_archive", "zip", b"\0PK\x03\x04rest")

# corpus_source: operator source configs (JSON).
digest = "sha256:" + "ab" * 32
put("corpus_source", "git", j({"name": "docs", "origin": {"kind": "git", "url": "https://example.org/owner/docs.git", "branch": "main", "admitted_commit": "0" * 40}, "include": ["docs/**/*.md"], "redirect_origins": ["https://cdn.example.org"]}))
put("corpus_source", "archive", j({"name": "rel", "origin": {"kind": "release_archive", "url": "https://example.org/r.tar.gz", "digest": digest}, "include": ["**"], "ceilings": {"max_files": 10}, "historical": True}))
put("corpus_source", "proxy", j({"name": "x", "origin": {"kind": "git", "url": "https://example.org/x.git", "branch": "m", "proxy": "http://p"}, "include": []}))
put("corpus_source", "ssh", j({"name": "x", "origin": {"kind": "git", "url": "git@example.org:x.git", "branch": "m"}, "include": []}))

# manifest: mode, the checked-in profile.
with open(os.path.join(root, "manifest", "reach.vps.public.toml"), "rb") as f:
    put("manifest", "vps-public", b"\0" + f.read())
put("manifest", "edits", b"\1" + bytes(range(0, 64)))

# plan_candidate: mode, candidate (the test vocabulary's ten steps and small ones).
src = open(os.path.join(root, "crates", "plan", "src", "testing.rs")).read()
ten = re.search(r'pub const TEN_STEPS: &str = r##"(.*?)"##;', src, re.S).group(1)
put("plan_candidate", "ten-steps", b"\0" + ten.encode())
put("plan_candidate", "one-step", b"\2" + j({"format": "reach.plan.candidate.v1", "diagnosis": "d", "steps": [{"kind": "run", "profile": "show-config"}]}).encode())
put("plan_candidate", "indexed-tag", b"\0" + j({"format": "reach.plan.candidate.v1", "diagnosis": "d", "steps": [{"kind": 2, "service": "svc"}]}).encode())
put("plan_candidate", "built", b"\1" + bytes(range(1, 80)))

# plan_patch_policy: policy, 0, pre-image, 0, target selector (the policy's sorted targets),
# edits (the test pack's policy and baselines: applied, refused, another file, no newline).
policy = re.search(r'pub const POLICY: &str = r#"(.*?)"#;', src, re.S).group(1)
app = "# app configuration\nlisten = 127.0.0.1\naccept = localhost\nlog = info\n"
lim = "max_clients = 10\nmax_queue = 100\n"
def pp(name, pre, sel, edits):
    put("plan_patch_policy", name, policy.encode() + b"\0" + pre.encode() + b"\0" + bytes([sel]) + j(edits).encode())
pp("repair", app, 0, [{"op": "replace", "line": "accept = localhost", "with": "accept = localhost, example.test"}])
pp("append", app, 0, [{"op": "append", "with": "# note"}])
pp("wildcard", app, 0, [{"op": "replace", "line": "accept = localhost", "with": "accept = *"}])
pp("limits", lim, 2, [{"op": "replace", "line": "max_queue = 100", "with": "max_queue = 200"}, {"op": "delete", "line": "max_clients = 10"}])
pp("absent", "", 1, [{"op": "append", "with": "anything"}])
pp("other-file", app, 9, [{"op": "append", "with": "# note"}])
pp("no-final-newline", "accept = localhost", 0, [{"op": "append", "with": "listen = 127.0.0.1"}])
pp("twice", app + "accept = localhost\n", 0, [{"op": "delete", "line": "accept = localhost"}])
put("plan_patch_policy", "policy-only", policy)

# taskpack_archive: mode 1, edits of the test pack's archive (offset 3 BE, xor).
put("taskpack_archive", "intact", b"\1")
put("taskpack_archive", "header", b"\1" + struct.pack(">I", (100 << 8) | 0x01) + struct.pack(">I", (600 << 8) | 0x20))
put("taskpack_archive", "cut", b"\1" + b"\xff\xff\xff\x00" + struct.pack(">I", 1024 << 8))
put("taskpack_archive", "raw", b"\0" + b"\0" * 1024)
# embedding_table: text length (2 BE), text lines, then a ReachStaticEmbedding@1 table of a
# small word-piece vocabulary (the format scripts/distil-embedding.py writes).
def table(words, dims):
    b = b"REACHSE1" + struct.pack("<II", dims, len(words))
    for w in words:
        b += struct.pack("<B", len(w.encode())) + w.encode()
    for i, _ in enumerate(words):
        b += struct.pack("<f", 0.01 * (i + 1)) + bytes((i * 7 + d * 13) % 256 for d in range(dims))
    return b
def et(name, text, tbl):
    put("embedding_table", name, struct.pack(">H", len(text.encode())) + text.encode() + tbl)
words = ["[UNK]", "[CLS]", "[SEP]", "cargo", "build", "##s", "crate", "doc", "##test", "(", ")", ".", "é"]
et("small", "how do cargo builds work?\ncargo build compiles a crate.\ndoctests (run)", table(words, 8))
et("one-dim", "x\ny", table(["[UNK]", "x"], 1))
et("no-unk", "crate crates unknownword", table(["crate", "##s"], 4))
et("truncated", "a", table(words, 8)[:-3])
print("seeds written under", out)
