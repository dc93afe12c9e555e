"""The host proxy threads of a program (IR :class:`~collsim.ir.ops.ProxyThread`) as host C++ in the kernel file.

Each (rank, channel) of the harness gets one ``std::thread`` that serves one
round of its proxy body per launch (``iter`` = 0, 1, ... from the state
reset, as the kernel's launch counter), concurrently with the kernels, until
the harness stops it. The body's accesses go to pinned host memory mapped
into the GPUs (``cudaHostAlloc`` with ``cudaHostAllocMapped``; on a UVA
platform the host and device addresses agree, which the harness checks).

Every access is a GCC/Clang ``__atomic`` builtin with the orders the verifier
gave the host's accesses. A protocol that declares ``host-tso``
(:data:`collsim.ir.ops.HOST_ORDERING`) was proved with every host load an
acquire and every store a release: loads ``__ATOMIC_ACQUIRE``, stores
``__ATOMIC_RELEASE`` (plain moves on x86, ``ldar``/``stlr`` on Arm), so
neither the compiler nor the CPU reorders what the proof relied on. One
that does not was proved with relaxed host accesses ordered by its fences:
loads and stores ``__ATOMIC_RELAXED``, and only its fences order them. A
fence is ``__ATOMIC_SEQ_CST`` (``mfence`` on x86, ``dmb ish`` on Arm).
(``std::atomic_ref`` would say the same in C++20; the harness builds as
C++17.) The proxy's registers are host vectors of their own.
"""
from __future__ import annotations

from typing import Any

from collsim.emit.layouts import EmitError
from collsim.emit.plan import EmitNode, ProgramPlan
from collsim.errors import UnsupportedError
from collsim.ir.expr import Expr
from collsim.ir.floats import Compare
from collsim.ir.layout import WordRole
from collsim.ir.ops import AtLeast, Equals, Fence, Fill, Load, Loop, NotEqual, PollUntil, ProxyThread, Reg, Store
from collsim.ir.types import FillPattern

__all__ = ["proxy_nodes", "proxy_source", "patch_main", "needs_host_side"]


def proxy_nodes(plan: ProgramPlan) -> list[EmitNode]:
    """The program's proxy threads (top-level nodes)."""
    return [node for node in plan.nodes if isinstance(node.op, ProxyThread)]


def _c(expr: Any) -> str:
    return expr.to_c() if isinstance(expr, Expr) else str(expr)


class _ProxyPrinter:
    """Prints one proxy body as the statements of ``proxy_round``."""

    def __init__(self, plan: ProgramPlan, proxy: EmitNode, host_tso: bool = True) -> None:
        self.plan = plan
        #: the orders of the host's loads and stores: what the verifier proved them with (see the module doc)
        self.load_order, self.store_order = (("__ATOMIC_ACQUIRE", "__ATOMIC_RELEASE") if host_tso
                                             else ("__ATOMIC_RELAXED", "__ATOMIC_RELAXED"))
        self.program = plan.program
        self.proxy = proxy
        self.lines: list[str] = []
        self.depth = 1

    @staticmethod
    def kind(order: str) -> str:
        """``acquire`` for ``__ATOMIC_ACQUIRE`` (as the comments of the emitted code say it)."""
        return order.removeprefix("__ATOMIC_").lower()

    def out(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def where(self, node: EmitNode) -> str:
        origin = f" ({node.op.origin})" if node.op.origin is not None else ""
        return f"{self.program.protocol}/{self.program.algorithm} proxy op #{node.id} {node.op.label}{origin}"

    def nodes(self, nodes: tuple[EmitNode, ...]) -> None:
        for node in nodes:
            op = node.op
            if isinstance(op, Loop):
                self.out(f"for (long long {op.var} = 0; {op.var} < {_c(op.count)}; ++{op.var}) {{  // IR #{node.id} "
                         f"{op.label}")
                self.depth += 1
                self.nodes(node.body)
                self.depth -= 1
                self.out("}")
            elif isinstance(op, Store):
                self.store(node, op)
            elif isinstance(op, Load):
                self.load(node, op)
            elif isinstance(op, PollUntil):
                self.poll(node, op)
            elif isinstance(op, Fence):
                self.out(f"__atomic_thread_fence(__ATOMIC_SEQ_CST);  // IR #{node.id} {op.label}")
            else:
                raise UnsupportedError(f"{self.where(node)}: a proxy thread runs loads, stores, polls and fences, "
                                       f"not {type(op).__name__}")

    def base(self, node: EmitNode, ref: Any) -> tuple[int, Any]:
        b = self.plan.buffer_index[ref.buffer]
        buf = self.program.buffer(ref.buffer)
        if not buf.on_host:
            raise EmitError(f"{self.where(node)}: buffer {buf.name} is in device memory")
        self.out(f"const long long o_owner = {_c(ref.rank)}, o_slot = {_c(ref.slot)}, o_region = {_c(ref.region)};")
        self.out(f"const long long o_line0 = {_c(ref.line)}, o_lines = {_c(ref.lines)};")
        self.out(f"if (o_owner < 0 || o_owner >= nranks || o_slot < 0 || o_slot >= {buf.depth} || o_region < 0 || "
                 f"o_region >= R_{b} || o_line0 < 0 || o_line0 + o_lines > L_{b}) return proxy_fail(p, {node.id});")
        self.out(f"char* const o_base = p.buf[{b}][o_owner] + (long long)chan * p.buf_stride[{b}] + "
                 f"((o_slot * R_{b} + o_region) * L_{b} + o_line0) * {buf.layout.line_bytes}LL;")
        return b, buf

    @staticmethod
    def words(buf: Any) -> list[tuple[int, int, Any, int]]:
        """(word index, byte offset in the line, word, data ordinal or -1) of every word of a line."""
        out, offset, k = [], 0, 0
        for i, word in enumerate(buf.layout.words):
            ordinal = -1
            if word.role is WordRole.DATA:
                ordinal, k = k, k + 1
            out.append((i, offset, word, ordinal))
            offset += word.nbytes
        return out

    @staticmethod
    def ctype(word: Any) -> str:
        return "unsigned int" if word.nbytes == 4 else "unsigned long long"

    def register(self, node: EmitNode, name: str) -> int:
        try:
            return self.plan.register_index[name]
        except KeyError:
            raise EmitError(f"{self.where(node)}: register {name!r} is not declared") from None

    def store(self, node: EmitNode, op: Store) -> None:
        self.out(f"{{  // IR #{node.id} {op.label}: {self.kind(self.store_order)} stores into host memory")
        self.depth += 1
        _, buf = self.base(node, op.dst)
        src = op.src
        if src is not None and not isinstance(src, (Reg, Fill)):
            raise UnsupportedError(f"{self.where(node)}: a proxy thread stores a register or a fill, not {src!r} "
                                   "(the kernel's input is in device memory)")
        if isinstance(src, Reg):
            x = self.register(node, src.name)
            self.out(f"const unsigned char* const o_src = regs[{x}].data() + ({_c(src.offset)});")
        self.out("for (long long ln = 0; ln < o_lines; ++ln) {")
        self.depth += 1
        self.out(f"char* const line = o_base + ln * {buf.layout.line_bytes}LL;")
        data_bytes = buf.layout.data_bytes
        for _, offset, word, ordinal in self.words(buf):
            t = self.ctype(word)
            if word.role is WordRole.DATA and src is not None:
                if isinstance(src, Reg):
                    x = self.register(node, src.name)
                    at = f"ln * {data_bytes}LL + {ordinal * word.nbytes}"
                    self.out(f"{{ {t} v = 0; if (o_src + {at} + sizeof v <= regs[{x}].data() + regs[{x}].size()) "
                             f"std::memcpy(&v, o_src + {at}, sizeof v);")
                    self.out(f"  __atomic_store_n(reinterpret_cast<{t}*>(line + {offset}), v, {self.store_order}); }}")
                else:
                    value = self._fill(node, src, word)
                    self.out(f"__atomic_store_n(reinterpret_cast<{t}*>(line + {offset}), ({t}){value}, "
                             f"{self.store_order});")
            elif word.role is WordRole.FLAG and op.flag is not None:
                self.out(f"__atomic_store_n(reinterpret_cast<{t}*>(line + {offset}), ({t})({_c(op.flag)}), "
                         f"{self.store_order});")
        self.depth -= 1
        self.out("}")
        self.depth -= 1
        self.out("}")

    def _fill(self, node: EmitNode, src: Fill, word: Any) -> str:
        if src.pattern is FillPattern.ZERO:
            return "0"
        sentinel = self.plan.sentinel_word
        if sentinel is None:
            raise EmitError(f"{self.where(node)}: Fill('sentinel') needs the protocol's sentinel")
        return f"0x{sentinel:08x}{sentinel:08x}ull" if word.nbytes == 8 else f"0x{sentinel:08x}u"

    def read_data(self, node: EmitNode, buf: Any, into: str, into_offset: Any) -> None:
        x = self.register(node, into)
        self.out(f"unsigned char* const o_dst = regs[{x}].data() + ({_c(into_offset)});")
        self.out("for (long long ln = 0; ln < o_lines; ++ln) {")
        self.depth += 1
        self.out(f"const char* const line = o_base + ln * {buf.layout.line_bytes}LL;")
        for _, offset, word, ordinal in self.words(buf):
            if word.role is not WordRole.DATA:
                continue
            t = self.ctype(word)
            at = f"ln * {buf.layout.data_bytes}LL + {ordinal * word.nbytes}"
            self.out(f"{{ const {t} v = __atomic_load_n(reinterpret_cast<const {t}*>(line + {offset}), "
                     f"{self.load_order});")
            self.out(f"  if (o_dst + {at} + sizeof v <= regs[{x}].data() + regs[{x}].size()) "
                     f"std::memcpy(o_dst + {at}, &v, sizeof v); }}")
        self.depth -= 1
        self.out("}")

    def load(self, node: EmitNode, op: Load) -> None:
        self.out(f"{{  // IR #{node.id} {op.label}: {self.kind(self.load_order)} loads from host memory")
        self.depth += 1
        _, buf = self.base(node, op.src)
        self.read_data(node, buf, op.into, op.into_offset)
        self.depth -= 1
        self.out("}")

    def predicate(self, node: EmitNode, until: Any, word: str) -> str:
        if isinstance(until, Equals):
            return f"{word} == (unsigned long long)({_c(until.value)})"
        if isinstance(until, AtLeast):
            return f"{word} >= (unsigned long long)({_c(until.value)})"
        if isinstance(until, NotEqual) and until.compare is Compare.BITWISE:
            return f"{word} != 0x{until.value:x}ull"
        raise UnsupportedError(f"{self.where(node)}: a proxy poll compares {until.describe()}; the host proxy emits "
                               "==, >= and bitwise !=")

    def poll(self, node: EmitNode, op: PollUntil) -> None:
        self.out(f"{{  // IR #{node.id} {op.label}: spin with {self.kind(self.load_order)} loads until "
                 f"{op.until.describe()}")
        self.depth += 1
        _, buf = self.base(node, op.src)
        polled = [(offset, word) for i, offset, word, _ in self.words(buf) if i in buf.layout.poll_words]
        self.out("for (;;) {")
        self.depth += 1
        self.out("bool o_ok = true;")
        self.out("for (long long ln = 0; o_ok && ln < o_lines; ++ln) {")
        self.depth += 1
        self.out(f"const char* const line = o_base + ln * {buf.layout.line_bytes}LL;")
        for offset, word in polled:
            t = self.ctype(word)
            self.out(f"{{ const unsigned long long w = __atomic_load_n(reinterpret_cast<const {t}*>(line + {offset}), "
                     f"{self.load_order});")
            self.out(f"  o_ok = o_ok && ({self.predicate(node, op.until, 'w')}); }}")
        self.depth -= 1
        self.out("}")
        self.out("if (o_ok) break;")
        self.out(f"if (proxy_should_stop(p)) return false;")
        self.depth -= 1
        self.out("}")
        if op.into is not None:
            self.read_data(node, buf, op.into, op.into_offset)
        self.depth -= 1
        self.out("}")


def needs_host_side(plan: ProgramPlan) -> bool:
    """Whether the program has proxy threads or buffers in host memory (its harness then allocates and runs them)."""
    return bool(proxy_nodes(plan)) or any(buf.on_host for buf in plan.program.buffers)


def proxy_source(plan: ProgramPlan, host_tso: bool = True) -> str:
    """The host C++ of the program's proxy threads, ``collsim_proxy_start``/``collsim_proxy_stop`` and
    ``collsim_buffer_on_host`` (empty for a program without proxy threads or host buffers); ``host_tso``: the
    protocol declares the host ordering ``host-tso`` (see the module doc for the orders either way)."""
    program = plan.program
    proxies = proxy_nodes(plan)
    hosted = [buf.on_host for buf in program.buffers]
    if not needs_host_side(plan):
        return ""
    out = ["// ---------------------------------------------------------------------------\n"
           "// Host proxy threads (IR ProxyThread): one std::thread per (rank, channel), one round per launch.\n"
           + ("// Their accesses to host memory are __atomic builtins: loads acquire, stores release (the host\n"
              "// ordering the verifier assumed, host-tso: x86-TSO or stronger).\n" if host_tso else
              "// Their accesses to host memory are relaxed __atomic builtins, ordered only by the proxy body's\n"
              "// fences (the protocol does not assume host-tso; as a weakly ordered host such as Arm needs).\n")
           + "#include <atomic>\n#include <cstdio>\n#include <cstring>\n#include <thread>\n#include <vector>\n\n",
           "int collsim_buffer_on_host(int buffer) {\n  static const int kOnHost[] = {"
           + ", ".join("1" if h else "0" for h in hosted) + "};\n"
           f"  return buffer >= 0 && buffer < {len(hosted)} ? kOnHost[buffer] : 0;\n}}\n\n",
           "namespace {\n\n"
           "struct ProxyPool {\n"
           "  std::vector<std::thread> threads;\n"
           "  std::atomic<int> stop{0};\n"
           "  void halt() {\n"
           "    stop.store(1);\n"
           "    for (std::thread& t : threads) if (t.joinable()) t.join();\n"
           "    threads.clear();\n"
           "    stop.store(0);\n"
           "  }\n"
           "  ~ProxyPool() { halt(); }\n"
           "};\n"
           "ProxyPool g_proxies;\n\n"
           "bool proxy_should_stop(const CollsimParams& p) {\n"
           "  return g_proxies.stop.load(std::memory_order_relaxed) != 0 || *p.abort_flag != 0;\n}\n\n"
           "bool proxy_fail(const CollsimParams& p, int op) {\n"
           "  (void)p;\n"
           "  std::fprintf(stderr, \"collsim_bench: proxy thread: IR op #%d accesses outside its buffer\\n\", op);\n"
           "  return false;\n}\n\n"]
    out.append("// One round of every proxy thread of (rank, chan): false when stopped or failed.\n"
               "bool proxy_round(const CollsimParams& p, long long rank, int chan, long long iter,\n"
               "                 std::vector<std::vector<unsigned char>>& regs) {\n"
               "  (void)regs;\n  (void)iter;\n"
               "  [[maybe_unused]] const long long nranks = (long long)p.nranks;\n"
               "  const long long rest = p.msg_bytes - (long long)chan * p.chan_bytes;\n"
               "  [[maybe_unused]] const long long msg_bytes = rest < 0 ? 0 : (rest > p.chan_bytes ? p.chan_bytes : "
               "rest);\n")
    for b, buf in enumerate(program.buffers):
        out.append(f"  [[maybe_unused]] const long long R_{b} = {_c(buf.regions)};  // {buf.name}: regions\n"
                   f"  [[maybe_unused]] const long long L_{b} = {_c(buf.lines)};  // {buf.name}: lines per region\n")
    for proxy in proxies:
        printer = _ProxyPrinter(plan, proxy, host_tso)
        printer.out(f"// IR #{proxy.id} {proxy.op.label}")
        printer.nodes(proxy.body)
        out.append("\n".join(printer.lines) + "\n")
    out.append("  return true;\n}\n\n")
    out.append("void proxy_main(CollsimParams p, long long rank, int chan) {\n"
               "  const long long rest = p.msg_bytes - (long long)chan * p.chan_bytes;\n"
               "  [[maybe_unused]] const long long msg_bytes = rest < 0 ? 0 : (rest > p.chan_bytes ? p.chan_bytes : "
               "rest);\n"
               "  [[maybe_unused]] const long long nranks = (long long)p.nranks;\n"
               f"  std::vector<std::vector<unsigned char>> regs({max(1, len(program.registers))});\n")
    for x, (name, size) in enumerate(program.registers.items()):
        out.append(f"  regs[{x}].assign((size_t)({_c(size)}), 0);  // {name}\n")
    out.append("  for (long long iter = 0; !proxy_should_stop(p); ++iter)\n"
               "    if (!proxy_round(p, rank, chan, iter, regs)) return;\n}\n\n"
               "}  // namespace\n\n"
               "// Start one proxy thread per (rank, channel), rounds from 0 (the launch counters were reset).\n"
               "void collsim_proxy_start(const CollsimParams& p) {\n"
               "  g_proxies.halt();\n")
    if proxies:
        out.append("  for (long long rank = 0; rank < p.nranks; ++rank)\n"
                   "    for (int chan = 0; chan < p.ctas; ++chan) g_proxies.threads.emplace_back(proxy_main, p, rank, "
                   "chan);\n")
    out.append("}\n\nvoid collsim_proxy_stop() { g_proxies.halt(); }\n\n")
    return "".join(out)


_ALLOC = ("    for (int b = 0; b < h.info->n_buffers; ++b)\n"
          "      if (!h.info->buffers[b].multicast) alloc(&m.buf[b], h.cap.buf_stride[b] * h.opt.ctas, "
          "h.info->buffers[b].name);\n")

#: (text of main.cu, what replaces it) for a program with proxy threads or host buffers
_MAIN_PATCHES = (
    ('#include "program.h"\n',
     '#include "program.h"\n'
     "\n// Host memory and proxy threads of this program (kernel.cu).\n"
     "void collsim_proxy_start(const CollsimParams& p);\nvoid collsim_proxy_stop();\n"
     "int collsim_buffer_on_host(int buffer);\n"),
    (_ALLOC,
     "    for (int b = 0; b < h.info->n_buffers; ++b) {\n"
     "      if (h.info->buffers[b].multicast) continue;\n"
     "      if (!collsim_buffer_on_host(b)) {\n"
     "        alloc(&m.buf[b], h.cap.buf_stride[b] * h.opt.ctas, h.info->buffers[b].name);\n"
     "        continue;\n"
     "      }\n"
     "      // host memory (Buffer(location='host')): pinned, mapped into every GPU; UVA makes both addresses one\n"
     "      void* host = nullptr;\n"
     "      const long long bytes = std::max(h.cap.buf_stride[b] * h.opt.ctas, 256LL);\n"
     "      total += (double)bytes;\n"
     "      CUDA_OK(cudaHostAlloc(&host, (size_t)bytes, cudaHostAllocMapped | cudaHostAllocPortable));\n"
     "      void* dev = nullptr;\n"
     "      CUDA_OK(cudaHostGetDevicePointer(&dev, host, 0));\n"
     "      if (dev != host) {\n"
     "        std::fprintf(stderr, \"collsim_bench: buffer %s: mapped host memory has another device address \"\n"
     "                     \"(no unified addressing)\\n\", h.info->buffers[b].name);\n"
     "        die(kExitRefused);\n"
     "      }\n"
     "      m.buf[b] = static_cast<char*>(host);\n"
     "    }\n"),
    ("void reset_state(Harness& h, const Geometry& g) {\n",
     "void reset_state(Harness& h, const Geometry& g) {\n"
     "  collsim_proxy_stop();  // the proxy threads of the previous state\n"),
    ("  h.launches = 0;\n}\n",
     "  h.launches = 0;\n"
     "  // proxy threads start with the fresh state: their rounds count launches from 0, as ITER does\n"
     "  collsim_proxy_start(params_for(h, g, 0, 0));\n}\n"),
)


def patch_main(text: str) -> str:
    """main.cu for a program with host memory or proxy threads (see :data:`_MAIN_PATCHES`)."""
    for old, new in _MAIN_PATCHES:
        if text.count(old) != 1:
            raise EmitError(f"the harness template changed: cannot place the proxy threads' hook at {old[:40]!r}")
        text = text.replace(old, new)
    return text
