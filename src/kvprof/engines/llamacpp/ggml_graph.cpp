// ggml graphs and a replay of ggml's graph allocator (see ggml_graph.hpp). The replay follows
// ggml-alloc.c: ggml_dyn_tallocr (a sorted free-block list, best fit among all but the last
// block, the last block growing the buffer, merges on free) under ggml_gallocr_alloc_graph_impl
// (leafs, then inputs, then nodes; in-place reuse of a parent with one consumer and the same
// layout; a tensor freed when its consumers and views are done).
#include "kvprof/engines/llamacpp/ggml_graph.hpp"

#include <algorithm>
#include <limits>

#include "kvprof/model/gguf.hpp"

namespace kvprof::engines {

namespace {

uint64_t type_size(uint32_t type) {
  switch (type) {
    case 0:   // f32
    case 26:  // i32
      return 4;
    case 1:   // f16
    case 30:  // bf16
    case 25:  // i16
      return 2;
    case 27:  // i64
    case 28:  // f64
      return 8;
    case 24:  // i8
      return 1;
    default:
      break;
  }
  const auto block = model::ggml_block(type);
  return block ? block->block_bytes : 4;
}

uint64_t block_size(uint32_t type) {
  const auto block = model::ggml_block(type);
  return block && block->block_elements > 1 ? block->block_elements : 1;
}

uint64_t align_up(uint64_t n, uint64_t a) {
  return (n + a - 1) / a * a;
}

// ggml_dyn_tallocr with one chunk (CPU and CUDA buffer types have no practical size limit).
class DynAllocator {
 public:
  explicit DynAllocator(uint64_t alignment) : m_alignment(alignment) {
    m_blocks.push_back({0, std::numeric_limits<uint64_t>::max() / 2});
  }

  uint64_t alloc(uint64_t size) {
    size = align_up(size, m_alignment);
    size_t best = m_blocks.size();
    uint64_t best_size = std::numeric_limits<uint64_t>::max();
    for (size_t i = 0; i + 1 < m_blocks.size(); ++i) {
      if (m_blocks[i].size >= size && m_blocks[i].size <= best_size) {
        best = i;
        best_size = m_blocks[i].size;
      }
    }
    if (best == m_blocks.size()) best = m_blocks.size() - 1;  // the last block grows the buffer
    Block& b = m_blocks[best];
    const uint64_t offset = b.offset;
    b.offset += size;
    b.size -= size;
    if (b.size == 0) m_blocks.erase(m_blocks.begin() + static_cast<std::ptrdiff_t>(best));
    m_max = std::max(m_max, offset + size);
    return offset;
  }

  void free(uint64_t offset, uint64_t size) {
    size = align_up(size, m_alignment);
    for (size_t i = 0; i < m_blocks.size(); ++i) {
      Block& b = m_blocks[i];
      if (b.offset + b.size == offset) {
        b.size += size;
        if (i + 1 < m_blocks.size() && b.offset + b.size == m_blocks[i + 1].offset) {
          b.size += m_blocks[i + 1].size;
          m_blocks.erase(m_blocks.begin() + static_cast<std::ptrdiff_t>(i + 1));
        }
        return;
      }
      if (offset + size == b.offset) {
        b.offset = offset;
        b.size += size;
        if (i > 0 && m_blocks[i - 1].offset + m_blocks[i - 1].size == b.offset) {
          m_blocks[i - 1].size += b.size;
          m_blocks.erase(m_blocks.begin() + static_cast<std::ptrdiff_t>(i));
        }
        return;
      }
    }
    auto pos = std::find_if(m_blocks.begin(), m_blocks.end(),
                            [&](const Block& b) { return b.offset >= offset; });
    m_blocks.insert(pos, {offset, size});
  }

  [[nodiscard]] uint64_t max_size() const { return m_max; }
  [[nodiscard]] uint64_t alignment() const { return m_alignment; }

 private:
  struct Block {
    uint64_t offset;
    uint64_t size;
  };
  uint64_t m_alignment;
  std::vector<Block> m_blocks;
  uint64_t m_max = 0;
};

bool is_view(const GgmlTensor& t) {
  return t.view_src >= 0;
}

bool same_layout(const GgmlTensor& a, const GgmlTensor& b) {
  return a.type == b.type && a.ne == b.ne && a.nb == b.nb;
}

struct HashNode {
  int n_children = 0;
  int n_views = 0;
  bool allocated = false;
  uint64_t offset = 0;
};

class Replay {
 public:
  Replay(const GgmlGraph& g, uint64_t alignment)
      : m_g(g), m_alloc(alignment), m_h(g.tensors().size()) {}

  uint64_t run() {
    for (const int32_t leaf : m_g.leafs())
      allocate(leaf);
    for (const int32_t n : m_g.nodes()) {
      const GgmlTensor& node = m_g.at(n);
      if (is_view(node)) m_h[static_cast<size_t>(node.view_src)].n_views += 1;
      if (node.input) allocate(n);
      for (const int32_t s : node.src) {
        m_h[static_cast<size_t>(s)].n_children += 1;
        if (m_g.at(s).input) allocate(s);
      }
    }
    for (const int32_t n : m_g.nodes()) {
      const GgmlTensor& node = m_g.at(n);
      for (const int32_t s : node.src)
        allocate(s);
      allocate(n);
      for (const int32_t s : node.src)
        release(s);
    }
    return m_alloc.max_size();
  }

 private:
  HashNode& h(int32_t i) { return m_h[static_cast<size_t>(i)]; }

  void allocate(int32_t i) {
    const GgmlTensor& t = m_g.at(i);
    HashNode& hn = h(i);
    if (t.external || hn.allocated || is_view(t)) return;
    hn.allocated = true;
    // In place over a parent this allocator owns (a view never is: ggml only reuses a parent
    // it allocated itself), with this node its last consumer and the same layout.
    if (ggml_op_inplace(t.op)) {
      for (const int32_t p : t.src) {
        const GgmlTensor& parent = m_g.at(p);
        HashNode& ph = h(p);
        if (!ph.allocated || parent.output) continue;
        if (!same_layout(t, parent) || ph.n_children != 1 || ph.n_views != 0) continue;
        hn.offset = ph.offset;
        ph.allocated = false;
        free_extra(t, parent, ph.offset);
        return;
      }
    }
    hn.offset = m_alloc.alloc(ggml_tensor_nbytes(t));
  }

  // A node that took over a larger parent gives the parent's tail back.
  void free_extra(const GgmlTensor& node, const GgmlTensor& parent, uint64_t offset) {
    const uint64_t a = m_alloc.alignment();
    const uint64_t parent_size = align_up(ggml_tensor_nbytes(parent), a);
    const uint64_t node_size = align_up(ggml_tensor_nbytes(node), a);
    if (parent_size > node_size) m_alloc.free(offset + node_size, parent_size - node_size);
  }

  void free_tensor(int32_t i) {
    const GgmlTensor& t = m_g.at(i);
    if (t.output) return;
    HashNode& hn = h(i);
    m_alloc.free(hn.offset, ggml_tensor_nbytes(t));
    hn.allocated = false;
  }

  void release(int32_t p) {
    HashNode& ph = h(p);
    ph.n_children -= 1;
    if (ph.n_children != 0 || ph.n_views != 0) return;
    const GgmlTensor& parent = m_g.at(p);
    if (is_view(parent)) {
      HashNode& root = h(parent.view_src);
      root.n_views -= 1;
      if (root.n_views == 0 && root.n_children == 0 && root.allocated) free_tensor(parent.view_src);
    } else if (ph.allocated) {
      free_tensor(p);
    }
  }

  const GgmlGraph& m_g;
  DynAllocator m_alloc;
  std::vector<HashNode> m_h;
};

}  // namespace

bool ggml_op_inplace(GgmlOp op) {
  switch (op) {
    case GgmlOp::add:
    case GgmlOp::mul:
    case GgmlOp::div:
    case GgmlOp::scale:
    case GgmlOp::rms_norm:
    case GgmlOp::rope:
    case GgmlOp::soft_max:
    case GgmlOp::unary:
    case GgmlOp::clamp:
      return true;
    default:
      return false;
  }
}

uint64_t ggml_tensor_nbytes(const GgmlTensor& t) {
  for (const int64_t n : t.ne) {
    if (n <= 0) return 0;
  }
  const uint64_t blck = block_size(t.type);
  uint64_t bytes = 0;
  if (blck == 1) {
    bytes = type_size(t.type);
    for (size_t i = 0; i < 4; ++i)
      bytes += static_cast<uint64_t>(t.ne[i] - 1) * t.nb[i];
  } else {
    bytes = static_cast<uint64_t>(t.ne[0]) * t.nb[0] / blck;
    for (size_t i = 1; i < 4; ++i)
      bytes += static_cast<uint64_t>(t.ne[i] - 1) * t.nb[i];
  }
  return bytes;
}

GgmlTensor GgmlGraph::contiguous(uint32_t type, std::array<int64_t, 4> ne) {
  GgmlTensor t;
  t.type = type;
  t.ne = ne;
  t.nb[0] = type_size(type);
  t.nb[1] = t.nb[0] * (static_cast<uint64_t>(ne[0]) / block_size(type));
  t.nb[2] = t.nb[1] * static_cast<uint64_t>(ne[1]);
  t.nb[3] = t.nb[2] * static_cast<uint64_t>(ne[2]);
  return t;
}

int32_t GgmlGraph::add(GgmlTensor t) {
  m_tensors.push_back(std::move(t));
  m_listed.push_back(false);
  return static_cast<int32_t>(m_tensors.size() - 1);
}

void GgmlGraph::expand(int32_t t) {
  // ggml_visit_parents, without recursion: a frame is a tensor and its next source to visit.
  if (m_listed[static_cast<size_t>(t)]) return;
  m_listed[static_cast<size_t>(t)] = true;
  std::vector<std::pair<int32_t, size_t>> stack{{t, 0}};
  while (!stack.empty()) {
    const int32_t id = stack.back().first;
    const GgmlTensor& x = m_tensors[static_cast<size_t>(id)];
    if (stack.back().second < x.src.size()) {
      const int32_t s = x.src[stack.back().second++];
      if (!m_listed[static_cast<size_t>(s)]) {
        m_listed[static_cast<size_t>(s)] = true;
        stack.emplace_back(s, 0);
      }
      continue;
    }
    (x.op == GgmlOp::none ? m_leafs : m_nodes).push_back(id);
    stack.pop_back();
  }
}

int32_t GgmlGraph::external(GgmlTensor t) {
  t.op = GgmlOp::none;
  t.external = true;
  return add(std::move(t));
}

int32_t GgmlGraph::input(uint32_t type, std::array<int64_t, 4> ne, std::string name) {
  GgmlTensor t = contiguous(type, ne);
  t.input = true;
  t.name = std::move(name);
  return add(std::move(t));
}

int32_t GgmlGraph::op(GgmlOp op, uint32_t type, std::array<int64_t, 4> ne, std::vector<int32_t> src,
                      std::string name) {
  GgmlTensor t = contiguous(type, ne);
  t.op = op;
  t.src = std::move(src);
  t.name = std::move(name);
  return add(std::move(t));
}

int32_t GgmlGraph::view(int32_t of, std::array<int64_t, 4> ne, std::array<uint64_t, 4> nb,
                        uint64_t offs, std::string name) {
  const GgmlTensor& base = at(of);
  GgmlTensor t;
  t.op = GgmlOp::view;
  t.type = base.type;
  t.ne = ne;
  t.nb = nb;
  t.src = {of};
  t.view_src = base.view_src >= 0 ? base.view_src : of;
  t.view_offs = (base.view_src >= 0 ? base.view_offs : 0) + offs;
  t.name = std::move(name);
  return add(std::move(t));
}

int32_t GgmlGraph::view_op(GgmlOp op, int32_t of, std::vector<int32_t> src) {
  const GgmlTensor& base = at(of);
  GgmlTensor t;
  t.op = op;
  t.type = base.type;
  t.ne = base.ne;
  t.nb = base.nb;
  t.src = std::move(src);
  t.view_src = base.view_src >= 0 ? base.view_src : of;
  t.view_offs = base.view_offs;
  return add(std::move(t));
}

int32_t GgmlGraph::reshape(int32_t of, std::array<int64_t, 4> ne, std::string name) {
  const GgmlTensor shape = contiguous(at(of).type, ne);
  return view(of, ne, shape.nb, 0, std::move(name));
}

int32_t GgmlGraph::permute(int32_t of, std::array<int, 4> axes, std::string name) {
  const GgmlTensor& base = at(of);
  std::array<int64_t, 4> ne{};
  std::array<uint64_t, 4> nb{};
  for (size_t i = 0; i < 4; ++i) {
    ne[static_cast<size_t>(axes[i])] = base.ne[i];
    nb[static_cast<size_t>(axes[i])] = base.nb[i];
  }
  return view(of, ne, nb, 0, std::move(name));
}

uint64_t ggml_alloc_replay(const GgmlGraph& g, uint64_t alignment) {
  return Replay(g, alignment).run();
}

}  // namespace kvprof::engines
