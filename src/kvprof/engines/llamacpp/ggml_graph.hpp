// A ggml compute graph as ggml's graph allocator sees it, and a replay of that allocator
// (ggml-alloc.c: inputs first, then every node in order, in place over a parent where the op
// allows it, best-fit reuse of freed blocks, a tensor freed when its last consumer has run), so
// a planner can size a compute buffer exactly as the engine will. Tensors carry their ggml type,
// shape and strides; views own no memory and point at the tensor they view.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kvprof::engines {

// The ops the planner's graphs use; those ggml can run in place are marked by ggml_op_inplace.
enum class GgmlOp : uint8_t {
  none,  // a leaf: an input, a weight, a cache tensor
  view,  // VIEW, RESHAPE, PERMUTE, TRANSPOSE
  get_rows,
  set_rows,
  mul_mat,
  mul_mat_id,
  add,
  mul,
  div,
  scale,
  rms_norm,
  rope,
  soft_max,
  unary,  // tanh, gelu, ...
  glu,    // swiglu, geglu
  flash_attn_ext,
  cont,
  cpy,
  argsort,
  sum_rows,
  clamp,
};

// True for the ops ggml_op_can_inplace lists (their kernels accept dst == src).
bool ggml_op_inplace(GgmlOp op);

struct GgmlTensor {
  GgmlOp op = GgmlOp::none;
  uint32_t type = 0;  // ggml type id (0 f32, 1 f16, 26 i32, 27 i64, quantized ids)
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  std::array<uint64_t, 4> nb{};  // strides in bytes
  std::vector<int32_t> src;      // indices of the sources, in ggml's src order
  int32_t view_src = -1;         // the tensor whose memory a view shares (always the root)
  uint64_t view_offs = 0;
  bool input = false;     // ggml_set_input: allocated before the graph runs
  bool output = false;    // ggml_set_output: never freed
  bool external = false;  // lives in another buffer (weights, KV cache): never allocated here
  std::string name;       // for diagnostics
};

// ggml_nbytes: the bytes a tensor spans.
uint64_t ggml_tensor_nbytes(const GgmlTensor& t);

// A graph under construction. Tensors are made first; expand() then lists them the way
// ggml_build_forward_expand does (depth first, sources in order: a node after its sources, a
// leaf when first reached), so the order of the expand calls decides the order of the graph.
class GgmlGraph {
 public:
  // A contiguous tensor of `type` and shape `ne` (unused dimensions 1).
  static GgmlTensor contiguous(uint32_t type, std::array<int64_t, 4> ne);

  // Makes a leaf allocated elsewhere (a weight or a cache tensor); returns its index.
  int32_t external(GgmlTensor t);
  // Makes an input leaf (ggml_set_input); returns its index.
  int32_t input(uint32_t type, std::array<int64_t, 4> ne, std::string name);
  // Makes a node computing a new contiguous tensor of `type` and shape `ne` from `src`.
  int32_t op(GgmlOp op, uint32_t type, std::array<int64_t, 4> ne, std::vector<int32_t> src,
             std::string name = {});
  // Makes a view node of `of` with its own shape and strides, `offs` bytes into it.
  int32_t view(int32_t of, std::array<int64_t, 4> ne, std::array<uint64_t, 4> nb, uint64_t offs = 0,
               std::string name = {});
  // Makes a node computed by `op` from `src` whose result is a view of `of` (SET_ROWS writes
  // into the cache it views).
  int32_t view_op(GgmlOp op, int32_t of, std::vector<int32_t> src);
  // A reshape of a contiguous tensor (a view with contiguous strides).
  int32_t reshape(int32_t of, std::array<int64_t, 4> ne, std::string name = {});
  // ggml_permute(of, a0, a1, a2, a3): axis i of `of` goes to position a_i.
  int32_t permute(int32_t of, std::array<int, 4> axes, std::string name = {});
  // ggml_build_forward_expand: lists `t` and every tensor it depends on not listed yet. A lone
  // input expanded this way is reserved with the other leafs and never freed.
  void expand(int32_t t);
  // Marks a tensor as a graph output.
  void set_output(int32_t t) { m_tensors[static_cast<size_t>(t)].output = true; }

  [[nodiscard]] const GgmlTensor& at(int32_t i) const { return m_tensors[static_cast<size_t>(i)]; }
  [[nodiscard]] const std::vector<GgmlTensor>& tensors() const { return m_tensors; }
  [[nodiscard]] const std::vector<int32_t>& nodes() const { return m_nodes; }
  [[nodiscard]] const std::vector<int32_t>& leafs() const { return m_leafs; }

 private:
  int32_t add(GgmlTensor t);
  std::vector<GgmlTensor> m_tensors;
  std::vector<bool> m_listed;
  std::vector<int32_t> m_nodes;
  std::vector<int32_t> m_leafs;
};

// The buffer ggml's graph allocator reserves for `g` (ggml_gallocr_reserve with one buffer type
// of `alignment` bytes and no size limit): the highest address any tensor reaches.
uint64_t ggml_alloc_replay(const GgmlGraph& g, uint64_t alignment);

}  // namespace kvprof::engines
