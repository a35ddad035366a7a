// Argument checks and compile-time dispatch shared by the CPU and CUDA bindings.
// Dtypes, ranks and sizes, and the CSR arrays and index ranges the kernels read (Graph
// validates its own in Python too): a wrong call fails before any kernel reads memory.
#pragma once

#include <cmath>

#include <ATen/ATen.h>

#include <string>
#include <type_traits>
#include <vector>

#include "common/reduce.h"
#include "common/sddmm.h"

namespace graphloc {

// The reduction named by an op's `reduce` argument (reduce.h's table), or an error naming it.
inline Reduce parse_reduce(const std::string& name) {
  Reduce r;
  TORCH_CHECK(parse_reduce(name, &r), "reduce must be one of 'sum', 'mean', 'max', 'min', 'mul', ",
              "got '", name, "'");
  return r;
}

#define GL_DISPATCH_INDEX(TYPE, ...) \
  [&] {                              \
    if ((TYPE) == at::kInt) {        \
      using index_t = int32_t;       \
      return __VA_ARGS__();          \
    }                                \
    using index_t = int64_t;         \
    return __VA_ARGS__();            \
  }()

#define GL_DISPATCH_FLOAT(TYPE, NAME, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, TYPE, NAME, __VA_ARGS__)

// The value types of the CPU reductions (torch_scatter's dtypes): the float types, half,
// int32 and int64.
// clang-format off
#define GL_DISPATCH_VALUES(TYPE, NAME, ...)                                                     \
  AT_DISPATCH_SWITCH(TYPE, NAME,                                                                \
      AT_DISPATCH_CASE_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, __VA_ARGS__)               \
      AT_DISPATCH_CASE(at::kInt, __VA_ARGS__)                                                   \
      AT_DISPATCH_CASE(at::kLong, __VA_ARGS__))
// clang-format on

// The kernels read index arrays through their data pointer, so a strided view (indptr[::2])
// would be read as other values than the ones checked: refused, not copied behind the
// caller's back (the Python API passes contiguous arrays).
inline void check_index(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.scalar_type() == at::kInt || t.scalar_type() == at::kLong, name,
              " must be int32 or int64, got ", t.scalar_type());
  TORCH_CHECK(t.dim() == 1, name, " must be 1-D, got shape ", t.sizes());
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous, got a view with stride ", t.stride(0),
              " (call .contiguous() on it)");
}

inline void check_indptr(const at::Tensor& indptr) {
  check_index(indptr, "indptr");
  TORCH_CHECK(indptr.numel() >= 1, "indptr must hold at least one entry (num_rows + 1)");
}

inline void check_same_device(const at::Tensor& a, const char* an, const at::Tensor& b,
                              const char* bn) {
  TORCH_CHECK(a.device() == b.device(), an, " is on ", a.device(), " but ", bn, " is on ",
              b.device());
}

inline void check_features(const at::Tensor& x, const char* name) {
  TORCH_CHECK(x.dim() == 2, name, " must be 2-D [rows, channels], got shape ", x.sizes());
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble ||
                  x.scalar_type() == at::kBFloat16,
              name, " must be float32, float64 or bfloat16, got ", x.scalar_type());
}

// The CPU reductions (spmm, segment_reduce, gather_csr) also take half, int32 and int64.
inline void check_reducible(const at::Tensor& x, const char* name) {
  TORCH_CHECK(x.dim() == 2, name, " must be 2-D [rows, channels], got shape ", x.sizes());
  const auto t = x.scalar_type();
  TORCH_CHECK(t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf ||
                  t == at::kInt || t == at::kLong,
              name, " must be float32, float64, bfloat16, float16, int32 or int64, got ", t);
}

// Edge values are [E] or [E, H]; H heads split the K channels into H equal blocks.
inline int64_t check_value(const at::Tensor& value, const at::Tensor& x, int64_t num_edges) {
  TORCH_CHECK(value.scalar_type() == x.scalar_type(), "edge values have dtype ",
              value.scalar_type(), " but the features have ", x.scalar_type());
  check_same_device(value, "edge values", x, "features");
  TORCH_CHECK(value.dim() == 1 || value.dim() == 2,
              "edge values must be [E] or [E, heads], got shape ", value.sizes());
  TORCH_CHECK(value.size(0) == num_edges, "edge values have ", value.size(0),
              " rows but the graph has ", num_edges, " edges");
  const int64_t heads = value.dim() == 2 ? value.size(1) : 1;
  TORCH_CHECK(heads >= 1 && x.size(1) % heads == 0, "features have ", x.size(1),
              " channels, not divisible into ", heads, " heads");
  return heads;
}

// The values the kernels index with are checked here too, not only by Python's Graph: a
// bad CSR or index is an error naming the op and the value, never a read out of bounds.
// Each check is one pass over the arrays and one host read (CsrFacts).

// What the CSR checks read of indptr and an index, gathered in one pass and one read back
// (on a GPU each read of device data waits for the device). The op csr_facts returns them.
struct CsrFacts {
  int64_t first = 0, last = 0, min_step = 0;  // of indptr (min_step 0 without steps)
  int64_t min_index = 0, max_index = -1;      // of the index (0 and -1 when it is empty)
};

// indptr needs an entry: indptr[0] raises as for any tensor.
inline CsrFacts csr_facts(const at::Tensor* indptr, const at::Tensor* index) {
  std::vector<at::Tensor> parts;
  const bool has_steps = indptr && indptr->numel() >= 2, has_index = index && index->numel();
  if (indptr) parts.insert(parts.end(), {(*indptr)[0], (*indptr)[-1]});
  if (has_steps) {  // in int64: an int32 difference wraps ([0, 2^31 - 1, -2, 5] looked sorted)
    const auto ptr = indptr->to(at::kLong);
    parts.push_back((ptr.slice(0, 1) - ptr.slice(0, 0, -1)).min());
  }
  if (has_index) {
    const auto [lo, hi] = at::aminmax(*index);
    parts.insert(parts.end(), {lo, hi});
  }
  CsrFacts f;
  if (parts.empty()) return f;
  const auto host = at::stack(parts).to(at::kLong).cpu();
  const int64_t* v = host.data_ptr<int64_t>();
  if (indptr) f.first = *v++, f.last = *v++;
  if (has_steps) f.min_step = *v++;
  if (has_index) f.min_index = v[0], f.max_index = v[1];
  return f;
}

// The op csr_facts (the same ATen function on every device).
inline at::Tensor csr_facts_op(const c10::optional<at::Tensor>& indptr,
                               const c10::optional<at::Tensor>& index) {
  TORCH_CHECK(indptr || index, "csr_facts needs indptr or index");
  if (indptr) check_indptr(*indptr);
  if (index) check_index(*index, "index");
  if (indptr && index) check_same_device(*indptr, "indptr", *index, "index");
  const CsrFacts f = csr_facts(indptr ? &*indptr : nullptr, index ? &*index : nullptr);
  return at::tensor({f.first, f.last, f.min_step, f.min_index, f.max_index}, at::kLong);
}

// indptr starts at 0, never decreases and ends at num_edges (the rows of `what`), by its
// facts; the failing step is looked up only for the message.
inline void require_csr_nnz(const at::Tensor& indptr, const CsrFacts& f, int64_t num_edges,
                            const char* what) {
  TORCH_CHECK(f.first == 0, "indptr must start at 0, got ", f.first);
  TORCH_CHECK(f.last == num_edges, "indptr ends at ", f.last, " but ", what, " has ", num_edges,
              " rows");
  if (f.min_step >= 0) return;
  const int64_t r = (indptr.slice(0, 1) < indptr.slice(0, 0, -1)).nonzero()[0][0].item<int64_t>();
  TORCH_CHECK(false, "indptr must be non-decreasing, but indptr[", r + 1,
              "] = ", indptr[r + 1].item<int64_t>(), " < indptr[", r,
              "] = ", indptr[r].item<int64_t>());
}

// Every entry of `index` lies in [0, bound), the rows of the array `what` it indexes.
inline void require_in_range(const at::Tensor& index, const CsrFacts& f, int64_t bound,
                             const char* name, const char* what, const char* hint) {
  if (index.numel() == 0 || (f.min_index >= 0 && f.max_index < bound)) return;
  const int64_t bad = f.min_index < 0 ? f.min_index : f.max_index;
  const int64_t pos = (index == bad).nonzero()[0][0].item<int64_t>();
  TORCH_CHECK(false, name, "[", pos, "] = ", bad, " is out of range: ", what, " has ", bound,
              " rows", hint);
}

inline void check_csr_nnz(const at::Tensor& indptr, int64_t num_edges, const char* what) {
  require_csr_nnz(indptr, csr_facts(&indptr, nullptr), num_edges, what);
}

inline void check_index_range(const at::Tensor& index, int64_t bound, const char* name,
                              const char* what, const char* hint = "") {
  if (index.numel() == 0) return;
  require_in_range(index, csr_facts(nullptr, &index), bound, name, what, hint);
}

// A CSR (indptr, indices) whose indices are rows of `what` (bound rows): both checks from
// one gathering of facts.
inline void check_csr_indices(const at::Tensor& indptr, const at::Tensor& indices, int64_t bound,
                              const char* what, const char* hint = "") {
  const CsrFacts f = csr_facts(&indptr, &indices);
  require_csr_nnz(indptr, f, indices.numel(), "indices");
  require_in_range(indices, f, bound, "indices", what, hint);
}

// A CSR of the graph itself (no features): indptr, indices of one index dtype, sizes
// agreeing, and every index a row of the same node set. The graph kernels (balls,
// sampling, eccentricity) walk from an index to its own row, so they need one node set.
inline void check_csr(const at::Tensor& indptr, const at::Tensor& indices) {
  check_indptr(indptr);
  check_index(indices, "indices");
  TORCH_CHECK(indices.scalar_type() == indptr.scalar_type(), "indices and indptr must share ",
              "one index dtype");
  check_csr_indices(indptr, indices, indptr.numel() - 1, "the CSR",
                    " (the graph kernels walk one node set: a bipartite graph is refused)");
}

// The data of an optional 1-D tensor (null when absent), checked to hold `entries` values of
// `dtype`; `keep` holds the contiguous copy read.
template <typename T>
const T* optional_per_entry(const std::optional<at::Tensor>& t, int64_t entries,
                            at::ScalarType dtype, const std::string& name, at::Tensor& keep) {
  if (!t.has_value()) return nullptr;
  TORCH_CHECK(t->dim() == 1 && t->numel() == entries && t->scalar_type() == dtype, name,
              " must be ", dtype, " [", entries, "], got ", t->scalar_type(), " ", t->sizes());
  keep = t->contiguous();
  return keep.data_ptr<T>();
}

inline EdgeOp parse_edge_op(const std::string& name) {
  if (name == "dot") return EdgeOp::Dot;
  if (name == "add") return EdgeOp::Add;
  if (name == "mul") return EdgeOp::Mul;
  TORCH_CHECK(false, "sddmm op must be one of 'dot', 'add', 'mul', got '", name, "'");
}

inline void check_sddmm_args(const at::Tensor& indptr, const at::Tensor& indices,
                             const at::Tensor& a, const at::Tensor& b, int64_t heads) {
  check_indptr(indptr);
  check_index(indices, "indices");
  check_features(a, "a (source features)");
  check_features(b, "b (destination features)");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "a is ", a.scalar_type(), " but b is ",
              b.scalar_type());
  check_same_device(a, "a", b, "b");
  TORCH_CHECK(a.size(1) == b.size(1), "a has ", a.size(1), " channels but b has ", b.size(1));
  TORCH_CHECK(b.size(0) == indptr.numel() - 1, "b has ", b.size(0), " rows but the graph has ",
              indptr.numel() - 1, " destination nodes");
  TORCH_CHECK(heads >= 1 && a.size(1) % heads == 0, "heads must divide the ", a.size(1),
              " channels, got ", heads);
  TORCH_CHECK(indices.scalar_type() == indptr.scalar_type(), "indices and indptr must share ",
              "one index dtype");
  check_csr_indices(indptr, indices, a.size(0), "a");
}

// spmm: a CSR whose two arrays share one index dtype, and float features (any reducible
// type where the kernel dispatches them: `reducible`).
inline void check_spmm_args(const at::Tensor& indptr, const at::Tensor& indices,
                            const at::Tensor& x, bool reducible = false) {
  check_indptr(indptr);
  check_index(indices, "indices");
  if (reducible)
    check_reducible(x, "x");
  else
    check_features(x, "x");
  TORCH_CHECK(indices.scalar_type() == indptr.scalar_type(), "indices (", indices.scalar_type(),
              ") and indptr (", indptr.scalar_type(), ") must share one index dtype");
  check_csr_indices(indptr, indices, x.size(0), "x");
}

// spmm's value_index: sum only, with values, one index per edge of the CSR's index dtype,
// each a row of the values.
inline void check_value_index(const at::Tensor& value_index, const c10::optional<at::Tensor>& value,
                              const at::Tensor& indptr, int64_t num_edges,
                              c10::string_view reduce) {
  TORCH_CHECK(reduce == "sum", "value_index takes reduce 'sum', got '", std::string(reduce), "'");
  TORCH_CHECK(value.has_value(), "value_index needs edge values (value is None)");
  check_index(value_index, "value_index");
  TORCH_CHECK(value_index.scalar_type() == indptr.scalar_type(), "value_index (",
              value_index.scalar_type(), ") and indptr (", indptr.scalar_type(),
              ") must share one index dtype");
  TORCH_CHECK(value_index.numel() == num_edges, "value_index must be [", num_edges,
              "] (one per edge), got shape ", value_index.sizes());
  check_same_device(value_index, "value_index", *value, "edge values");
  check_index_range(value_index, value->size(0), "value_index", "the edge values");
}

// spmm's csc_value: the edge values in the transpose's order, so shaped like them (sum only).
inline void check_csc_value(const at::Tensor& csc_value, const c10::optional<at::Tensor>& value,
                            const c10::optional<at::Tensor>& csc_perm, c10::string_view reduce) {
  TORCH_CHECK(reduce == "sum", "csc_value takes reduce 'sum', got '", std::string(reduce), "'");
  TORCH_CHECK(csc_perm.has_value(), "csc_value needs the transpose (csc_perm is None)");
  TORCH_CHECK(value.has_value(), "csc_value needs edge values (value is None)");
  TORCH_CHECK(
      csc_value.sizes() == value->sizes() && csc_value.scalar_type() == value->scalar_type(),
      "csc_value must have the shape and dtype of the edge values ", value->sizes(), " ",
      value->scalar_type(), ", got ", csc_value.sizes(), " ", csc_value.scalar_type());
  check_same_device(csc_value, "csc_value", *value, "edge values");
}

// spmm_arg_backward: the transpose, and arg / grad_out shaped like the forward output.
inline void check_arg_backward_args(const at::Tensor& csc_indptr, const at::Tensor& csc_indices,
                                    const at::Tensor& csc_perm, const at::Tensor& x,
                                    const at::Tensor& arg, const at::Tensor& grad_out) {
  check_indptr(csc_indptr);
  check_index(csc_indices, "csc_indices");
  check_index(csc_perm, "csc_perm");
  check_features(x, "x");
  TORCH_CHECK(arg.scalar_type() == csc_indptr.scalar_type() && arg.sizes() == grad_out.sizes(),
              "arg must have the index dtype and the shape of grad_out ", grad_out.sizes());
  TORCH_CHECK(x.size(1) == grad_out.size(1), "x has ", x.size(1), " channels but grad_out has ",
              grad_out.size(1));
  TORCH_CHECK(x.size(0) == csc_indptr.numel() - 1, "x has ", x.size(0),
              " rows but the transpose has ", csc_indptr.numel() - 1);
  TORCH_CHECK(csc_indices.numel() == csc_perm.numel(), "csc_indices has ", csc_indices.numel(),
              " entries but csc_perm has ", csc_perm.numel());
  check_csr_nnz(csc_indptr, csc_perm.numel(), "csc_perm");
  check_index_range(csc_indices, grad_out.size(0), "csc_indices", "grad_out");
  check_index_range(csc_perm, csc_perm.numel(), "csc_perm", "the edge list");
}

// segment_softmax: float scores [E, heads].
inline void check_scores(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.dim() == 2, name, " must be [E, heads], got shape ", t.sizes());
  check_features(t, name);
}

// segment_attention: scores [E, heads] and features [N, heads * C] over one CSR.
inline void check_attention_args(const at::Tensor& score, const at::Tensor& indptr,
                                 const at::Tensor& indices, const at::Tensor& x) {
  check_spmm_args(indptr, indices, x);
  check_scores(score, "score");
  TORCH_CHECK(score.scalar_type() == x.scalar_type(), "score is ", score.scalar_type(),
              " but x is ", x.scalar_type());
  TORCH_CHECK(score.size(0) == indices.numel(), "score has ", score.size(0),
              " rows but the graph has ", indices.numel(), " edges");
  TORCH_CHECK(x.size(1) % score.size(1) == 0, "x has ", x.size(1), " channels, not divisible into ",
              score.size(1), " heads");
}

// additive_attention: per-node score halves a_src [N_src, heads] and a_dst [rows, heads],
// features [N_src, heads * C] over one CSR, a LeakyReLU slope >= 0 (the backward reads the
// side of the LeakyReLU off the sign of its output).
inline void check_additive_attention_args(const at::Tensor& a_src, const at::Tensor& a_dst,
                                          double negative_slope, const at::Tensor& indptr,
                                          const at::Tensor& indices, const at::Tensor& x) {
  TORCH_CHECK(negative_slope >= 0, "negative_slope must be >= 0, got ", negative_slope);
  check_spmm_args(indptr, indices, x);
  check_scores(a_src, "a_src");
  check_scores(a_dst, "a_dst");
  TORCH_CHECK(a_src.scalar_type() == x.scalar_type() && a_dst.scalar_type() == x.scalar_type(),
              "a_src (", a_src.scalar_type(), ") and a_dst (", a_dst.scalar_type(),
              ") must have x's dtype ", x.scalar_type());
  TORCH_CHECK(a_src.size(0) == x.size(0), "a_src has ", a_src.size(0), " rows but x has ",
              x.size(0));
  TORCH_CHECK(a_dst.size(0) == indptr.numel() - 1, "a_dst has ", a_dst.size(0),
              " rows but the graph has ", indptr.numel() - 1);
  TORCH_CHECK(a_dst.size(1) == a_src.size(1) && a_src.size(1) > 0, "a_src has ", a_src.size(1),
              " heads and a_dst ", a_dst.size(1), "; they must be equal and at least 1");
  TORCH_CHECK(x.size(1) % a_src.size(1) == 0, "x has ", x.size(1), " channels, not divisible into ",
              a_src.size(1), " heads");
}

// gatv2_scores: source rows src [N_src, H * C] and destination rows dst [rows, H * C] of
// one dtype over one CSR, the attention vectors att [H, C], a finite LeakyReLU slope.
inline void check_gatv2_args(const at::Tensor& indptr, const at::Tensor& indices,
                             const at::Tensor& src, const at::Tensor& dst, const at::Tensor& att,
                             double negative_slope) {
  TORCH_CHECK(std::isfinite(negative_slope), "negative_slope must be finite, got ", negative_slope);
  TORCH_CHECK(att.dim() == 2 && att.size(0) >= 1, "att must be [heads, C] with heads >= 1, got ",
              "shape ", att.sizes());
  TORCH_CHECK(att.scalar_type() == src.scalar_type(), "att is ", att.scalar_type(), " but src is ",
              src.scalar_type());
  check_sddmm_args(indptr, indices, src, dst, 1);
  TORCH_CHECK(src.size(1) == att.numel(), "src and dst have ", src.size(1), " channels but att ",
              "holds ", att.size(0), " heads of ", att.size(1));
}

// gated_sum: destination rows key [rows, C], source rows query and value [N_src, C], all of
// one dtype, over one CSR.
inline void check_gated_sum_args(const at::Tensor& indptr, const at::Tensor& indices,
                                 const at::Tensor& key, const at::Tensor& query,
                                 const at::Tensor& value) {
  check_sddmm_args(indptr, indices, query, key, 1);
  check_features(value, "value");
  TORCH_CHECK(value.scalar_type() == query.scalar_type(), "value is ", value.scalar_type(),
              " but query is ", query.scalar_type());
  check_same_device(value, "value", query, "query");
  TORCH_CHECK(value.sizes() == query.sizes(), "value has shape ", value.sizes(),
              " but query has shape ", query.sizes());
}

// film_sum: destination rows gamma and beta [rows, C], source rows value [N_src, C], all of
// one dtype, over one CSR.
inline void check_film_sum_args(const at::Tensor& indptr, const at::Tensor& indices,
                                const at::Tensor& gamma, const at::Tensor& beta,
                                const at::Tensor& value) {
  check_sddmm_args(indptr, indices, value, gamma, 1);
  check_features(beta, "beta");
  TORCH_CHECK(beta.scalar_type() == gamma.scalar_type(), "beta is ", beta.scalar_type(),
              " but gamma is ", gamma.scalar_type());
  check_same_device(beta, "beta", gamma, "gamma");
  TORCH_CHECK(beta.sizes() == gamma.sizes(), "beta has shape ", beta.sizes(),
              " but gamma has shape ", gamma.sizes());
}

// edge_outer_sum: weight [E, K] (K >= 1) in CSR order, source rows x [N_src, C], one dtype,
// over one CSR of E edges.
inline void check_edge_outer_sum_args(const at::Tensor& indptr, const at::Tensor& indices,
                                      const at::Tensor& weight, const at::Tensor& x) {
  check_indptr(indptr);
  check_index(indices, "indices");
  TORCH_CHECK(indices.scalar_type() == indptr.scalar_type(), "indices and indptr must share ",
              "one index dtype");
  check_features(x, "x");
  check_features(weight, "weight");
  TORCH_CHECK(weight.scalar_type() == x.scalar_type(), "weight is ", weight.scalar_type(),
              " but x is ", x.scalar_type());
  check_same_device(weight, "weight", x, "x");
  check_same_device(indptr, "indptr", x, "x");
  TORCH_CHECK(weight.size(0) == indices.numel(), "weight has ", weight.size(0),
              " rows but the graph has ", indices.numel(), " edges");
  TORCH_CHECK(weight.size(1) >= 1, "weight must have at least one column, got shape ",
              weight.sizes());
  check_csr_indices(indptr, indices, x.size(0), "x");
}

// A transpose of a CSR over num_edges edges: its rows the num_cols columns of the CSR,
// t_indices the CSR's rows, t_perm the edge positions.
inline void check_transpose_args(const at::Tensor& t_indptr, const at::Tensor& t_indices,
                                 const at::Tensor& t_perm, const at::Tensor& indptr,
                                 int64_t num_cols, int64_t num_rows, int64_t num_edges) {
  check_indptr(t_indptr);
  check_index(t_indices, "csc_indices");
  check_index(t_perm, "csc_perm");
  TORCH_CHECK(t_indptr.scalar_type() == indptr.scalar_type() &&
                  t_indices.scalar_type() == indptr.scalar_type() &&
                  t_perm.scalar_type() == indptr.scalar_type(),
              "the transpose must have the index dtype ", indptr.scalar_type());
  TORCH_CHECK(t_indptr.numel() - 1 == num_cols, "the transpose has ", t_indptr.numel() - 1,
              " rows but the sources are ", num_cols);
  TORCH_CHECK(t_perm.numel() == num_edges && t_indices.numel() == num_edges,
              "the transpose must hold the ", num_edges, " edges");
  check_csr_nnz(t_indptr, num_edges, "csc_indices");
  check_index_range(t_indices, num_rows, "csc_indices", "dst");
  check_index_range(t_perm, num_edges, "csc_perm", "the edge list");
}

// segment_attention_backward and additive_attention_backward: the forward's outputs and their
// gradients, and a transpose whose columns are the CSR rows, for num_edges edges of `heads`
// scores each.
inline void check_attention_backward_args(int64_t num_edges, int64_t heads, const at::Tensor& lse,
                                          const at::Tensor& out, const at::Tensor& grad_out,
                                          const c10::optional<at::Tensor>& grad_lse,
                                          const at::Tensor& indptr, const at::Tensor& x,
                                          const at::Tensor& csc_indptr,
                                          const at::Tensor& csc_indices,
                                          const at::Tensor& csc_perm) {
  const int64_t rows = indptr.numel() - 1;
  for (const at::Tensor* t : {&lse, &out, &grad_out})
    TORCH_CHECK(t->dim() == 2 && t->size(0) == rows && t->scalar_type() == x.scalar_type(),
                "lse, out and grad_out must be ", x.scalar_type(), " with ", rows, " rows, got ",
                t->scalar_type(), " of shape ", t->sizes());
  TORCH_CHECK(lse.size(1) == heads, "lse has ", lse.size(1), " heads, the scores ", heads);
  TORCH_CHECK(out.size(1) == x.size(1) && grad_out.size(1) == x.size(1), "out and grad_out ",
              "must have ", x.size(1), " channels like x");
  if (grad_lse) TORCH_CHECK(grad_lse->sizes() == lse.sizes(), "grad_lse must be shaped like lse");
  check_indptr(csc_indptr);
  check_index(csc_indices, "csc_indices");
  check_index(csc_perm, "csc_perm");
  check_index_range(csc_indices, rows, "csc_indices", "out");
  check_index_range(csc_perm, num_edges, "csc_perm", "the edge list");
  TORCH_CHECK(csc_perm.scalar_type() == csc_indptr.scalar_type(), "csc_perm must have the ",
              "index dtype ", csc_indptr.scalar_type());
  TORCH_CHECK(csc_perm.numel() == csc_indices.numel() && csc_indices.numel() == num_edges,
              "the transpose must hold the ", num_edges, " edges");
  check_csr_nnz(csc_indptr, num_edges, "csc_indices");
  TORCH_CHECK(csc_indptr.numel() - 1 == x.size(0), "the transpose has ", csc_indptr.numel() - 1,
              " rows but x has ", x.size(0));
}

}  // namespace graphloc
