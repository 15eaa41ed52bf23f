#include "emulator/machine.hpp"

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <source_location>
#include <utility>
#include <vector>

// The program image, for the reads of constants that kernel code may make.
extern "C" char __executable_start;
extern "C" char _end;

namespace flash::emulator {
namespace {

constexpr std::size_t stack_bytes = 256 * 1024;
constexpr std::size_t shared_capacity = 227 * 1024;  // the most an SM90 block can have
constexpr std::size_t red_zone = 512;
constexpr int warp_lanes = isa::lanes;

enum class wait : std::uint8_t { runnable, barrier, collective, exited };
enum class op : std::uint8_t { sync_warp, shuffle, ldmatrix, mma };

const char* op_name(op o) {
  switch (o) {
    case op::sync_warp:
      return "__syncwarp";
    case op::shuffle:
      return "shfl.sync";
    case op::ldmatrix:
      return "ldmatrix";
    case op::mma:
      return "mma.sync";
  }
  return "?";
}

// What a lane brings to a warp-collective instruction, and where its results go.
struct collective {
  op kind;
  std::source_location site;  // the call site: lanes at different sites diverged
  shuffle_mode mode;
  std::uint32_t value;
  int lane_or_mask;
  std::uint32_t* result;
  int count;
  bool trans;
  std::uint32_t address;
  isa::input type;
  std::uint32_t a[4], b[2];
  float c[4];
  float* d;
};

struct copy {
  std::uint32_t dst;
  const unsigned char* src;
  unsigned src_size;
};

// A thread's stack, with an inaccessible page below it: an overflow faults instead of
// overwriting the heap.
class stack_memory {
 public:
  stack_memory() {
    void* p = mmap(nullptr, guard + stack_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    mprotect(p, guard, PROT_NONE);
    base_ = static_cast<unsigned char*>(p);
  }
  ~stack_memory() {
    if (base_) munmap(base_, guard + stack_bytes);
  }
  stack_memory(stack_memory&& o) noexcept : base_(std::exchange(o.base_, nullptr)) {}
  stack_memory& operator=(stack_memory&&) = delete;
  unsigned char* get() const { return base_ + guard; }

 private:
  static constexpr std::size_t guard = 4096;
  unsigned char* base_ = nullptr;
};

struct thread {
  ucontext_t context;
  stack_memory stack;
  int index = 0, warp = 0, lane = 0;
  wait status = wait::runnable;
  collective op{};
  std::vector<copy> open_group;
  std::deque<std::vector<copy>> groups;  // committed, oldest first
  int declarations = 0;
  int in_machine = 0;  // > 0 while the emulator runs on this thread's behalf
};

struct write_record {
  std::int32_t thread = -1;
  std::uint64_t barrier = 0, warp_sync = 0;
};
struct read_record {
  std::uint32_t lanes = 0;
  std::uint64_t barrier = 0, warp_sync = 0;
};

struct allocation {
  std::size_t bytes;
  std::unique_ptr<unsigned char[]> storage;
};

struct machine {
  settings config;
  std::string fault;
  std::map<std::uintptr_t, allocation> allocations;  // by first usable byte

  // The launch in progress.
  extent grid, block, block_index;
  void (*body)(const void*) = nullptr;
  const void* parameters = nullptr;
  std::size_t parameter_bytes = 0;
  std::vector<thread> threads;
  int live = 0, at_barrier = 0, warps = 0;
  std::vector<int> arrived;                    // per warp, lanes at a collective
  std::vector<std::uint64_t> warp_sync;        // per warp, the epoch since its last __syncwarp
  std::uint64_t epoch = 0;                     // grows at every barrier, never reused
  std::uint64_t block_start = 0, barrier = 0;  // the block's first epoch, and its current one
  std::source_location barrier_site;           // where the threads at the barrier wait
  thread* current = nullptr;
  ucontext_t scheduler;
  bool aborted = false;
  std::mt19937 order;

  // The block's shared memory and what the checks know of each byte.
  std::unique_ptr<unsigned char[]> shared{new unsigned char[shared_capacity]};
  std::size_t shared_used = 0;
  struct declaration {
    std::size_t offset, bytes, align;
  };
  std::vector<declaration> declarations;
  std::vector<write_record> writers;
  std::vector<read_record> readers;   // [byte][warp]
  std::vector<std::int32_t> pending;  // thread + 1 of the cp.async in flight to the byte
};

machine& m() {
  static machine instance;
  return instance;
}

// The running thread, as the access checks read it first: constant-initialised, so that a check
// made before or while the machine is constructed (library code's instrumented copies) finds none.
constinit thread* running = nullptr;

// Marks the emulator's own work on a thread: inline library code the emulator calls may be the
// instrumented copy of a kernel translation unit, and its accesses are not the kernel's.
struct machine_code {
  thread* t = m().current;
  machine_code() {
    if (t) ++t->in_machine;
  }
  ~machine_code() {
    if (t) --t->in_machine;
  }
  machine_code(const machine_code&) = delete;
  machine_code& operator=(const machine_code&) = delete;
};

std::string thread_name(int index) {
  char text[48];
  std::snprintf(text, sizeof text, "thread %d (warp %d, lane %d)", index, index / warp_lanes,
                index % warp_lanes);
  return text;
}

std::string who(const thread& t) {
  const machine& s = m();
  char block[48];
  std::snprintf(block, sizeof block, "block (%u,%u,%u) ", s.block_index.x, s.block_index.y,
                s.block_index.z);
  return block + thread_name(t.index);
}

// Stops the launch: the first fault is kept, and the faulting thread never runs again.
[[noreturn]] void fail(const std::string& what) {
  machine& s = m();
  if (s.fault.empty()) s.fault = what;
  s.aborted = true;
  swapcontext(&s.current->context, &s.scheduler);
  std::abort();  // an aborted thread is never resumed
}

void yield() {
  machine& s = m();
  swapcontext(&s.current->context, &s.scheduler);
}

// ---- shared memory ----

bool ordered(const machine& s, int other, std::uint64_t barrier, std::uint64_t warp_sync,
             const thread& t) {
  if (barrier != s.barrier) return true;  // a __syncthreads lies between
  return other / warp_lanes == t.warp && warp_sync != s.warp_sync[t.warp];
}

void check_shared(thread& t, std::size_t offset, std::size_t bytes, bool write, bool record,
                  const char* what) {
  machine& s = m();
  if (offset + bytes > s.shared_used) {
    char text[200];
    std::snprintf(text, sizeof text,
                  ": %s of %zu bytes at shared offset %zu, outside the %zu "
                  "bytes of shared memory the block declared",
                  what, bytes, offset, s.shared_used);
    fail("out-of-bounds shared access: " + who(t) + text);
  }
  for (std::size_t i = offset; i < offset + bytes; ++i) {
    if (s.pending[i] != 0) {
      fail("read or write before cp.async.wait_group: " + who(t) + " " + what + "s shared byte " +
           std::to_string(i) + ", which a cp.async of " + thread_name(s.pending[i] - 1) +
           " has not yet landed");
    }
    const write_record& w = s.writers[i];
    const bool written = w.thread >= 0 && w.barrier >= s.block_start;
    if (written && w.thread != t.index && !ordered(s, w.thread, w.barrier, w.warp_sync, t))
      fail("shared-memory race: " + who(t) + " " + what + "s shared byte " + std::to_string(i) +
           ", which " + thread_name(w.thread) + " wrote with no barrier between");
    if (!write) {
      if (!written)
        fail("uninitialised shared read: " + who(t) + " reads shared byte " + std::to_string(i) +
             ", which no thread of the block has written");
      read_record& r = s.readers[i * s.warps + t.warp];
      if (r.barrier != s.barrier || r.warp_sync != s.warp_sync[t.warp])
        r = {0, s.barrier, s.warp_sync[t.warp]};
      r.lanes |= 1u << t.lane;
      continue;
    }
    for (int w2 = 0; w2 < s.warps; ++w2) {
      const read_record& r = s.readers[i * s.warps + w2];
      if (r.lanes == 0 || r.barrier != s.barrier) continue;
      std::uint32_t others = r.lanes;
      if (w2 == t.warp) {
        if (r.warp_sync != s.warp_sync[t.warp]) continue;
        others &= ~(1u << t.lane);
      }
      if (others != 0)
        fail("shared-memory race: " + who(t) + " " + what + "s shared byte " + std::to_string(i) +
             ", which " + thread_name(w2 * warp_lanes + std::countr_zero(others)) +
             " read with no barrier between");
    }
    if (record) s.writers[i] = {t.index, s.barrier, s.warp_sync[t.warp]};
  }
}

void land(thread& t, const copy& c) {
  machine& s = m();
  for (std::size_t i = c.dst; i < c.dst + 16u; ++i) s.pending[i] = 0;
  check_shared(t, c.dst, 16, true, true, "cp.async write");
  if (c.src_size > 0 && !in_allocation(c.src, c.src_size))
    fail("out-of-bounds global access: " + who(t) +
         ": a cp.async source was freed before it landed");
  std::memcpy(s.shared.get() + c.dst, c.src, c.src_size);
  std::memset(s.shared.get() + c.dst + c.src_size, 0, 16 - c.src_size);
}

// ---- warp collectives ----

void resolve(int warp) {
  machine& s = m();
  thread* lanes = &s.threads[std::size_t(warp) * warp_lanes];
  switch (lanes[0].op.kind) {
    case op::sync_warp:
      s.warp_sync[warp] = ++s.epoch;
      break;
    case op::shuffle: {
      std::uint32_t values[warp_lanes];
      for (int l = 0; l < warp_lanes; ++l) values[l] = lanes[l].op.value;
      for (int l = 0; l < warp_lanes; ++l)
        *lanes[l].op.result = values[isa::shuffle_source(lanes[l].op.mode == shuffle_mode::bfly, l,
                                                         lanes[l].op.lane_or_mask)];
      break;
    }
    case op::ldmatrix: {
      const int count = lanes[0].op.count;
      for (int i = 0; i < count; ++i) {
        isa::matrix8x8 matrix;
        for (int r = 0; r < 8; ++r) {
          thread& source = lanes[8 * i + r];
          const std::uint32_t address = source.op.address;
          if (address % 16 != 0)
            fail("misaligned ldmatrix: " + who(source) + " supplies shared address " +
                 std::to_string(address) + ", not a multiple of 16");
          check_shared(source, address, 16, false, true, "ldmatrix read");
          std::memcpy(matrix[r].data(), s.shared.get() + address, 16);
        }
        for (int l = 0; l < warp_lanes; ++l)
          lanes[l].op.result[i] = isa::ldmatrix_register(matrix, lanes[0].op.trans, l);
      }
      break;
    }
    case op::mma: {
      isa::mma_operands in;
      for (int l = 0; l < warp_lanes; ++l) {
        std::copy_n(lanes[l].op.a, 4, in.a[l]);
        std::copy_n(lanes[l].op.b, 2, in.b[l]);
        std::copy_n(lanes[l].op.c, 4, in.c[l]);
      }
      float d[warp_lanes][4];
      isa::mma_m16n8k16(lanes[0].op.type, in, d);
      for (int l = 0; l < warp_lanes; ++l) std::copy_n(d[l], 4, lanes[l].op.d);
      break;
    }
  }
}

std::string op_text(const collective& c) {
  std::string text = op_name(c.kind);
  if (c.kind == op::ldmatrix) text += ".x" + std::to_string(c.count) + (c.trans ? ".trans" : "");
  return text;
}

std::string site_text(const std::source_location& site) {
  const char* slash = std::strrchr(site.file_name(), '/');
  return std::string(slash ? slash + 1 : site.file_name()) + ":" + std::to_string(site.line());
}

bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         std::strcmp(a.file_name(), b.file_name()) == 0;
}

// A lane's collective, before its operands are filled in.
collective at(op kind, const std::source_location& site) {
  collective c{};
  c.kind = kind;
  c.site = site;
  return c;
}

// Two lanes' collectives are one instruction when they are the same operation; the .aligned
// ones (ldmatrix, mma) must also be the same instruction in the program, which the call site
// stands for. shfl.sync and __syncwarp may meet from different sites (sm_70 and later).
bool same_instruction(const collective& a, const collective& b) {
  if (a.kind != b.kind || a.count != b.count || a.trans != b.trans) return false;
  if (a.kind != op::ldmatrix && a.kind != op::mma) return true;
  return same_site(a.site, b.site);
}

// The calling lane reaches a warp-collective instruction: the warp goes on when all 32 lanes
// have reached the same one.
void rendezvous(const collective& c, unsigned mask) {
  machine& s = m();
  thread& t = *s.current;
  if (mask != 0xffffffffu)
    fail("unsupported warp mask: " + who(t) + " runs " + op_text(c) + " with mask " +
         std::to_string(mask) + "; the emulator runs whole-warp collectives only");
  thread* lanes = &s.threads[std::size_t(t.warp) * warp_lanes];
  for (int l = 0; l < warp_lanes; ++l) {
    if (lanes[l].status == wait::exited)
      fail("divergent warp collective: " + who(t) + " reaches " + op_text(c) + ", but lane " +
           std::to_string(l) + " of its warp has exited");
    if (lanes[l].status == wait::barrier)
      fail("divergent warp collective: " + who(t) + " reaches " + op_text(c) + " while lane " +
           std::to_string(l) + " waits at __syncthreads");
    if (lanes[l].status == wait::collective && !same_instruction(lanes[l].op, c))
      fail("divergent warp collective: " + who(t) + " reaches " + op_text(c) + " at " +
           site_text(c.site) + " while lane " + std::to_string(l) + " waits at " +
           op_text(lanes[l].op) + " at " + site_text(lanes[l].op.site));
  }
  t.op = c;
  if (++s.arrived[t.warp] < warp_lanes) {
    t.status = wait::collective;
    yield();
    return;
  }
  resolve(t.warp);
  s.arrived[t.warp] = 0;
  for (int l = 0; l < warp_lanes; ++l) lanes[l].status = wait::runnable;
}

void release_barrier() {
  machine& s = m();
  s.barrier = ++s.epoch;
  s.at_barrier = 0;
  const auto count = std::size_t(s.block.x) * s.block.y * s.block.z;
  for (std::size_t i = 0; i < count; ++i)
    if (s.threads[i].status == wait::barrier) s.threads[i].status = wait::runnable;
}

void thread_exit() {
  const machine_code inside;
  machine& s = m();
  thread& t = *s.current;
  if (!t.open_group.empty() || !t.groups.empty())
    fail("cp.async never waited for: " + who(t) + " exits with copies in flight");
  const thread* lanes = &s.threads[std::size_t(t.warp) * warp_lanes];
  for (int l = 0; l < warp_lanes; ++l)
    if (lanes[l].status == wait::collective)
      fail("divergent warp collective: " + who(t) + " exits while lane " + std::to_string(l) +
           " waits at " + op_text(lanes[l].op));
  t.status = wait::exited;
  --s.live;
  if (s.live > 0 && s.at_barrier == s.live) release_barrier();
  swapcontext(&t.context, &s.scheduler);
  std::abort();  // an exited thread is never resumed
}

void thread_entry() {
  machine& s = m();
  s.body(s.parameters);
  thread_exit();
}

bool run_block() {
  machine& s = m();
  const int count = int(s.block.x * s.block.y * s.block.z);
  s.live = count;
  s.at_barrier = 0;
  s.block_start = s.barrier = ++s.epoch;
  std::fill(s.arrived.begin(), s.arrived.end(), 0);
  for (auto& w : s.warp_sync) w = ++s.epoch;
  for (int i = 0; i < count; ++i) {
    thread& t = s.threads[std::size_t(i)];
    t.index = i;
    t.warp = i / warp_lanes;
    t.lane = i % warp_lanes;
    t.status = wait::runnable;
    t.open_group.clear();
    t.groups.clear();
    t.declarations = 0;
    t.in_machine = 0;
    getcontext(&t.context);
    t.context.uc_stack.ss_sp = t.stack.get();
    t.context.uc_stack.ss_size = stack_bytes;
    t.context.uc_link = nullptr;
    makecontext(&t.context, thread_entry, 0);
  }
  std::vector<int> order(std::size_t(count), 0);
  for (int i = 0; i < count; ++i) order[std::size_t(i)] = i;
  while (s.live > 0) {
    if (s.config.schedule_seed != 0) std::shuffle(order.begin(), order.end(), s.order);
    bool ran = false;
    for (int i : order) {
      thread& t = s.threads[std::size_t(i)];
      if (t.status != wait::runnable) continue;
      s.current = running = &t;
      swapcontext(&s.scheduler, &t.context);
      s.current = running = nullptr;
      if (s.aborted) return false;
      ran = true;
    }
    // Every way threads can wait on each other is checked where they start to wait, so some
    // thread always goes on; this is the emulator's own invariant.
    if (!ran && s.live > 0) {
      char text[96];
      std::snprintf(text, sizeof text, "emulator error: no thread of block (%u,%u,%u) can go on",
                    s.block_index.x, s.block_index.y, s.block_index.z);
      s.fault = text;
      return false;
    }
  }
  // A block's end is the last barrier: its copies must all have landed (checked at exit).
  return true;
}

std::size_t align_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }

}  // namespace

settings& configuration() { return m().config; }
const std::string& fault() { return m().fault; }

bool run(extent grid, extent block, void (*body)(const void*), const void* parameters,
         std::size_t parameter_bytes) {
  machine& s = m();
  s.fault.clear();
  s.aborted = false;
  const std::uint64_t count = std::uint64_t(block.x) * block.y * block.z;
  if (count == 0 || count > 1024 || count % warp_lanes != 0) {
    s.fault = "block of " + std::to_string(count) +
              " threads: the emulator runs blocks of whole warps, at most 1024 threads";
    return false;
  }
  s.grid = grid;
  s.block = block;
  s.body = body;
  s.parameters = parameters;
  s.parameter_bytes = parameter_bytes;
  s.warps = int(count / warp_lanes);
  s.arrived.assign(std::size_t(s.warps), 0);
  s.warp_sync.assign(std::size_t(s.warps), 0);
  if (s.threads.size() < count) s.threads = std::vector<thread>(count);
  s.order.seed(s.config.schedule_seed);
  s.shared_used = 0;
  s.declarations.clear();
  s.writers.clear();
  s.readers.clear();
  s.pending.clear();
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        s.block_index = {x, y, z};
        // Shared memory starts as garbage, as on the GPU: NaN in every element type.
        std::memset(s.shared.get(), 0xff, s.shared_used);
        if (!run_block()) return false;  // the threads' stacks are reused, never unwound
      }
  s.body = nullptr;
  return true;
}

void* allocate(std::size_t bytes) {
  machine& s = m();
  const std::size_t total = bytes + 2 * red_zone;
  std::unique_ptr<unsigned char[]> storage(new unsigned char[total + 256]);
  auto base = reinterpret_cast<std::uintptr_t>(storage.get());
  const std::uintptr_t first = align_up(base + red_zone, 256);
  s.allocations.emplace(first, allocation{bytes, std::move(storage)});
  return reinterpret_cast<void*>(first);
}

bool release(void* p) { return m().allocations.erase(reinterpret_cast<std::uintptr_t>(p)) == 1; }

bool in_allocation(const void* p, std::size_t bytes) {
  const auto& allocations = m().allocations;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = allocations.upper_bound(a);
  if (it == allocations.begin()) return false;
  --it;
  return a + bytes <= it->first + it->second.bytes;
}

extent thread_index() {
  const machine_code inside;
  const machine& s = m();
  const auto i = unsigned(s.current->index);
  return {i % s.block.x, i / s.block.x % s.block.y, i / (s.block.x * s.block.y)};
}
extent block_index() { return m().block_index; }
extent block_dim() { return m().block; }
extent grid_dim() { return m().grid; }

void sync_threads(std::source_location site) {
  const machine_code inside;
  machine& s = m();
  thread& t = *s.current;
  const thread* lanes = &s.threads[std::size_t(t.warp) * warp_lanes];
  for (int l = 0; l < warp_lanes; ++l)
    if (lanes[l].status == wait::collective)
      fail("divergent warp collective: " + who(t) + " reaches __syncthreads while lane " +
           std::to_string(l) + " waits at " + op_text(lanes[l].op));
  // One barrier instruction for the whole block: threads at another one took another branch.
  if (s.at_barrier > 0 && !same_site(s.barrier_site, site))
    fail("divergent barrier: " + who(t) + " reaches __syncthreads at " + site_text(site) +
         " while other threads wait at " + site_text(s.barrier_site));
  s.barrier_site = site;
  if (++s.at_barrier == s.live) {
    release_barrier();  // and the block goes on in the scheduler's order
  } else {
    t.status = wait::barrier;
  }
  yield();
}

void sync_warp(unsigned mask, std::source_location site) {
  const machine_code inside;
  rendezvous(at(op::sync_warp, site), mask);
}

std::uint32_t shuffle(shuffle_mode mode, unsigned mask, std::uint32_t value, int lane_or_mask,
                      std::source_location site) {
  const machine_code inside;
  collective c = at(op::shuffle, site);
  c.mode = mode;
  c.value = value;
  c.lane_or_mask = lane_or_mask;
  std::uint32_t result = 0;
  c.result = &result;
  rendezvous(c, mask);
  return result;
}

void* shared_declaration(std::size_t bytes, std::size_t align) {
  const machine_code inside;
  machine& s = m();
  thread& t = *s.current;
  const auto n = std::size_t(t.declarations++);
  if (n < s.declarations.size()) {
    const auto& d = s.declarations[n];
    if (d.bytes != bytes || d.align != align)
      fail("shared declarations differ: " + who(t) + " declares " + std::to_string(bytes) +
           " bytes where another thread declared " + std::to_string(d.bytes));
    return s.shared.get() + d.offset;
  }
  const std::size_t offset = align_up(s.shared_used, align);
  if (offset + bytes > shared_capacity)
    fail("too much shared memory: " + who(t) + " declares " + std::to_string(offset + bytes) +
         " bytes in all, over the " + std::to_string(shared_capacity) + " a block may have");
  s.declarations.push_back({offset, bytes, align});
  s.shared_used = offset + bytes;
  std::memset(s.shared.get() + offset, 0xff, bytes);
  s.writers.resize(s.shared_used);
  s.readers.resize(s.shared_used * std::size_t(s.warps));
  s.pending.resize(s.shared_used, 0);
  return s.shared.get() + offset;
}

std::uint32_t shared_address(const void* p) {
  const machine_code inside;
  machine& s = m();
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const auto base = reinterpret_cast<std::uintptr_t>(s.shared.get());
  if (a < base || a > base + s.shared_used)
    fail("not shared memory: " + who(*s.current) +
         " converts a generic address outside the "
         "block's shared memory to a shared one");
  return std::uint32_t(a - base);
}

void cp_async(std::uint32_t dst, const void* src, unsigned src_size) {
  const machine_code inside;
  machine& s = m();
  thread& t = *s.current;
  if (dst % 16 != 0 || reinterpret_cast<std::uintptr_t>(src) % 16 != 0)
    fail("misaligned cp.async: " + who(t) + " copies 16 bytes to shared offset " +
         std::to_string(dst) + " from an address that is not 16-byte aligned");
  if (src_size > 16) fail("cp.async: " + who(t) + " gives a source size over 16");
  if (src_size > 0 && !in_allocation(src, src_size))
    fail("out-of-bounds global access: " + who(t) + ": cp.async reads " + std::to_string(src_size) +
         " bytes outside every allocation");
  check_shared(t, dst, 16, true, false, "cp.async write");
  for (std::size_t i = dst; i < dst + 16u; ++i) s.pending[i] = t.index + 1;
  t.open_group.push_back({dst, static_cast<const unsigned char*>(src), src_size});
}

void cp_async_commit() {
  const machine_code inside;
  thread& t = *m().current;
  t.groups.push_back(std::move(t.open_group));
  t.open_group.clear();
}

void cp_async_wait(int newest_groups_left_pending) {
  const machine_code inside;
  thread& t = *m().current;
  while (int(t.groups.size()) > newest_groups_left_pending) {
    for (const copy& c : t.groups.front()) land(t, c);
    t.groups.pop_front();
  }
}

void ldmatrix(int count, bool trans, std::uint32_t* registers, std::uint32_t address,
              std::source_location site) {
  const machine_code inside;
  collective c = at(op::ldmatrix, site);
  c.count = count;
  c.trans = trans;
  c.address = address;
  c.result = registers;
  rendezvous(c, 0xffffffffu);
}

void mma_m16n8k16(isa::input type, float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                  std::uint32_t b1, const float (&c)[4], std::source_location site) {
  const machine_code inside;
  collective instruction = at(op::mma, site);
  instruction.type = type;
  std::copy_n(a, 4, instruction.a);
  instruction.b[0] = b0;
  instruction.b[1] = b1;
  std::copy_n(c, 4, instruction.c);
  instruction.d = d;
  rendezvous(instruction, 0xffffffffu);
}

float ex2_approx_ftz(float x) {
  const machine_code inside;
  if (std::fpclassify(x) == FP_SUBNORMAL) x = std::copysign(0.f, x);
  float y = static_cast<float>(std::exp2(double(x)));
  const unsigned seed = m().config.approximation_seed;
  if (seed != 0 && std::isfinite(y) && y != 0.f) {
    // Up to 2 units in the last place either way, the same for the same input and seed.
    std::uint32_t h = std::bit_cast<std::uint32_t>(x) * 0x9e3779b1u ^ seed * 0x85ebca6bu;
    h ^= h >> 15;
    const int steps = int(h % 5) - 2;
    for (int i = 0; i < std::abs(steps); ++i) y = std::nextafter(y, steps > 0 ? INFINITY : 0.f);
  }
  if (std::fpclassify(y) == FP_SUBNORMAL) y = 0.f;
  return y;
}

void access(const void* p, std::size_t bytes, bool write, const void* code) {
  if (running == nullptr || running->in_machine > 0) return;  // not the kernel's access
  machine& s = m();
  const machine_code inside;
  thread& t = *s.current;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const auto shared = reinterpret_cast<std::uintptr_t>(s.shared.get());
  if (a >= shared && a < shared + shared_capacity) {
    check_shared(t, a - shared, bytes, write, true, write ? "write" : "read");
    return;
  }
  const auto stack = reinterpret_cast<std::uintptr_t>(t.stack.get());
  if (a >= stack && a + bytes <= stack + stack_bytes) return;  // the thread's own locals
  if (in_allocation(p, bytes)) return;
  const auto parameters = reinterpret_cast<std::uintptr_t>(s.parameters);
  const bool parameter = a >= parameters && a + bytes <= parameters + s.parameter_bytes;
  const bool image = a >= reinterpret_cast<std::uintptr_t>(&__executable_start) &&
                     a + bytes <= reinterpret_cast<std::uintptr_t>(&_end);
  if (!write && (parameter || image)) return;
  char text[200];
  std::snprintf(text, sizeof text,
                ": %s of %zu bytes at %p, outside every allocation (code at program offset %#zx)",
                write ? "write" : "read", bytes, p,
                std::size_t(static_cast<const char*>(code) - &__executable_start));
  fail("out-of-bounds global access: " + who(t) + text);
}

}  // namespace flash::emulator

// Every load and store of the kernel translation units, which are compiled with
// -fsanitize=thread for these calls and linked without ThreadSanitizer's runtime: the emulator's
// access checks stand in for it.
extern "C" {
#define FLASH_EMULATOR_ACCESS(n)                                       \
  void __tsan_read##n(void* p) {                                       \
    flash::emulator::access(p, n, false, __builtin_return_address(0)); \
  }                                                                    \
  void __tsan_write##n(void* p) {                                      \
    flash::emulator::access(p, n, true, __builtin_return_address(0));  \
  }                                                                    \
  void __tsan_unaligned_read##n(void* p) {                             \
    flash::emulator::access(p, n, false, __builtin_return_address(0)); \
  }                                                                    \
  void __tsan_unaligned_write##n(void* p) {                            \
    flash::emulator::access(p, n, true, __builtin_return_address(0));  \
  }
FLASH_EMULATOR_ACCESS(1)
FLASH_EMULATOR_ACCESS(2)
FLASH_EMULATOR_ACCESS(4)
FLASH_EMULATOR_ACCESS(8)
FLASH_EMULATOR_ACCESS(16)
#undef FLASH_EMULATOR_ACCESS
void __tsan_read_range(void* p, unsigned long n) {
  flash::emulator::access(p, n, false, __builtin_return_address(0));
}
void __tsan_write_range(void* p, unsigned long n) {
  flash::emulator::access(p, n, true, __builtin_return_address(0));
}
// Vtable pointers belong to host objects (the test framework's); kernels have none.
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
}
