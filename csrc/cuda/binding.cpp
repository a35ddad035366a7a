// The CUDA backend of torch.ops.graphloc: argument checks, output allocation and dispatch
// to the raw-pointer launchers of cuda/kernels.h. The only CUDA code that touches ATen.
// No host reads of device data here (Graph validated the CSR once), except coo_to_csr's
// range check.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>
#include <torch/library.h>

#include "common/ops.h"
#include "cuda/kernels.h"

namespace graphloc {
namespace {

template <typename T>
struct CudaType {
  using type = T;
};
template <>
struct CudaType<at::BFloat16> {
  using type = __nv_bfloat16;
};

template <typename T>
auto ptr(const at::Tensor& t) {
  using U = typename CudaType<T>::type;
  return t.defined() && t.numel() ? reinterpret_cast<U*>(t.data_ptr<T>()) : nullptr;
}

void check_launch(cudaError_t err, const char* op) {
  TORCH_CHECK(err == cudaSuccess, "graphloc::", op,
              " CUDA kernel failed: ", cudaGetErrorString(err));
}

cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream(); }

std::tuple<at::Tensor, at::Tensor> reduce_cuda(const at::Tensor& indptr,
                                               const c10::optional<at::Tensor>& indices,
                                               const c10::optional<at::Tensor>& value,
                                               const at::Tensor& x, Reduce reduce) {
  const c10::cuda::CUDAGuard guard(x.device());
  TORCH_CHECK(reduce != Reduce::Mul,
              "reduce='mul' has no CUDA kernel (graphloc.scatter runs it "
              "through the pure-torch reference on GPUs)");
  const int64_t num_rows = indptr.numel() - 1, K = x.size(1);
  const int64_t num_edges = indices ? indices->numel() : x.size(0);
  check_same_device(indptr, "indptr", x, "x");
  const int64_t heads = value ? check_value(*value, x, num_edges) : 1;
  auto xc = x.contiguous();
  auto vc = value ? value->contiguous() : at::Tensor();
  auto ic = indices ? indices->contiguous() : at::Tensor();
  auto out = at::empty({num_rows, K}, x.options());
  auto arg =
      at::empty({has_arg(reduce) ? num_rows : 0, K}, x.options().dtype(indptr.scalar_type()));
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::spmm", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      check_launch(
          cuda::spmm(indptr.data_ptr<index_t>(), ic.defined() ? ic.data_ptr<index_t>() : nullptr,
                     ptr<scalar_t>(vc), heads, ptr<scalar_t>(xc), num_rows, num_edges, K, reduce,
                     ptr<scalar_t>(out), has_arg(reduce) ? arg.data_ptr<index_t>() : nullptr,
                     stream()),
          "spmm");
    });
  });
  return {out, arg};
}

std::tuple<at::Tensor, at::Tensor> spmm_cuda(
    const at::Tensor& indptr, const at::Tensor& indices, const c10::optional<at::Tensor>& value,
    const at::Tensor& x, c10::string_view reduce, const c10::optional<at::Tensor>&,
    const c10::optional<at::Tensor>&, const c10::optional<at::Tensor>& csc_perm,
    const c10::optional<at::Tensor>& value_index, const c10::optional<at::Tensor>& csc_value) {
  check_spmm_args(indptr, indices, x);
  if (csc_value) check_csc_value(*csc_value, value, csc_perm, reduce);  // read by the backward only
  if (!value_index)
    return reduce_cuda(indptr, indices, value, x, parse_reduce(std::string(reduce)));
  // no kernel of its own on the GPU: the values are gathered into edge order first
  check_value_index(*value_index, value, indptr, indices.numel(), reduce);
  return reduce_cuda(indptr, indices, value->index_select(0, *value_index), x, Reduce::Sum);
}

std::tuple<at::Tensor, at::Tensor> segment_reduce_cuda(const at::Tensor& src,
                                                       const at::Tensor& indptr,
                                                       c10::string_view reduce) {
  check_indptr(indptr);
  check_features(src, "src");
  check_csr_nnz(indptr, src.size(0), "src");
  return reduce_cuda(indptr, c10::nullopt, c10::nullopt, src, parse_reduce(std::string(reduce)));
}

std::tuple<at::Tensor, at::Tensor> spmm_arg_backward_cuda(
    const at::Tensor& csc_indptr, const at::Tensor& csc_indices, const at::Tensor& csc_perm,
    const c10::optional<at::Tensor>& value, const at::Tensor& x, const at::Tensor& arg,
    const at::Tensor& grad_out, bool need_value_grad) {
  check_arg_backward_args(csc_indptr, csc_indices, csc_perm, x, arg, grad_out);
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t num_src = csc_indptr.numel() - 1, K = x.size(1), E = csc_perm.numel();
  const int64_t heads = value ? check_value(*value, x, E) : 1;
  auto vc = value ? value->contiguous() : at::Tensor();
  auto xc = x.contiguous(), ac = arg.contiguous(), gc = grad_out.contiguous();
  auto grad_x = at::empty_like(xc);
  auto grad_value = need_value_grad && vc.defined() ? at::zeros_like(vc) : at::Tensor();
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::spmm_arg_backward", [&] {
    GL_DISPATCH_INDEX(csc_indptr.scalar_type(), [&] {
      check_launch(cuda::spmm_arg_backward(
                       csc_indptr.data_ptr<index_t>(), csc_indices.contiguous().data_ptr<index_t>(),
                       csc_perm.contiguous().data_ptr<index_t>(), ptr<scalar_t>(vc), heads,
                       ptr<scalar_t>(xc), ac.data_ptr<index_t>(), ptr<scalar_t>(gc), num_src, K,
                       ptr<scalar_t>(grad_x), ptr<scalar_t>(grad_value), stream()),
                   "spmm_arg_backward");
    });
  });
  return {grad_x, grad_value.defined() ? grad_value : at::empty({0}, x.options())};
}

at::Tensor gather_csr_cuda(const at::Tensor& src, const at::Tensor& indptr, int64_t E) {
  check_indptr(indptr);
  check_features(src, "src");
  const int64_t num_rows = indptr.numel() - 1, K = src.size(1);
  TORCH_CHECK(src.size(0) == num_rows, "src has ", src.size(0), " rows but indptr describes ",
              num_rows);
  check_csr_nnz(indptr, E, "the output");
  const c10::cuda::CUDAGuard guard(src.device());
  auto sc = src.contiguous();
  auto out = at::empty({E, K}, src.options());
  GL_DISPATCH_FLOAT(src.scalar_type(), "graphloc::gather_csr", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      check_launch(cuda::gather_csr(indptr.data_ptr<index_t>(), ptr<scalar_t>(sc), num_rows, K,
                                    ptr<scalar_t>(out), stream()),
                   "gather_csr");
    });
  });
  return out;
}

// gather_rows on CUDA: ATen's index_select after the same checks (the per-row overhead that
// the CPU kernel avoids is the CPU's).
at::Tensor gather_rows_cuda(const at::Tensor& src, const at::Tensor& index) {
  check_reducible(src, "src");
  check_index(index, "index");
  check_same_device(index, "index", src, "src");
  check_index_range(index, src.size(0), "index", "src");
  const c10::cuda::CUDAGuard guard(src.device());
  return src.index_select(0, index);
}

at::Tensor sddmm_cuda(const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& a,
                      const at::Tensor& b, c10::string_view op, int64_t heads,
                      const c10::optional<at::Tensor>&, const c10::optional<at::Tensor>&,
                      const c10::optional<at::Tensor>&) {
  check_sddmm_args(indptr, indices, a, b, heads);
  const EdgeOp edge_op = parse_edge_op(std::string(op));
  const c10::cuda::CUDAGuard guard(a.device());
  const int64_t num_rows = indptr.numel() - 1, K = a.size(1), E = indices.numel();
  auto ac = a.contiguous(), bc = b.contiguous(), ic = indices.contiguous();
  auto out = at::empty({E, edge_op == EdgeOp::Dot ? heads : K}, a.options());
  GL_DISPATCH_FLOAT(a.scalar_type(), "graphloc::sddmm", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      check_launch(
          cuda::sddmm(indptr.data_ptr<index_t>(), ic.data_ptr<index_t>(), ptr<scalar_t>(ac),
                      ptr<scalar_t>(bc), num_rows, K, heads, edge_op, ptr<scalar_t>(out), stream()),
          "sddmm");
    });
  });
  return out;
}

at::Tensor segment_softmax_cuda(const at::Tensor& score, const at::Tensor& indptr) {
  check_indptr(indptr);
  check_scores(score, "score");
  check_csr_nnz(indptr, score.size(0), "score");
  const c10::cuda::CUDAGuard guard(score.device());
  auto sc = score.contiguous();
  auto out = at::empty_like(sc);
  GL_DISPATCH_FLOAT(sc.scalar_type(), "graphloc::segment_softmax", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      check_launch(
          cuda::segment_softmax(indptr.data_ptr<index_t>(), ptr<scalar_t>(sc), indptr.numel() - 1,
                                sc.size(1), ptr<scalar_t>(out), stream()),
          "segment_softmax");
    });
  });
  return out;
}

at::Tensor segment_softmax_backward_cuda(const at::Tensor& out, const at::Tensor& grad,
                                         const at::Tensor& indptr) {
  check_indptr(indptr);
  check_scores(out, "out");
  TORCH_CHECK(grad.sizes() == out.sizes(), "grad has shape ", grad.sizes(), " but out has ",
              out.sizes());
  check_csr_nnz(indptr, out.size(0), "out");
  const c10::cuda::CUDAGuard guard(out.device());
  auto yc = out.contiguous(), gc = grad.contiguous();
  auto gin = at::empty_like(yc);
  GL_DISPATCH_FLOAT(yc.scalar_type(), "graphloc::segment_softmax_backward", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      check_launch(cuda::segment_softmax_backward(indptr.data_ptr<index_t>(), ptr<scalar_t>(yc),
                                                  ptr<scalar_t>(gc), indptr.numel() - 1, yc.size(1),
                                                  ptr<scalar_t>(gin), stream()),
                   "segment_softmax_backward");
    });
  });
  return gin;
}

std::tuple<at::Tensor, at::Tensor> segment_attention_cuda(
    const at::Tensor& score, const at::Tensor& indptr, const at::Tensor& indices,
    const at::Tensor& x, const c10::optional<at::Tensor>&, const c10::optional<at::Tensor>&,
    const c10::optional<at::Tensor>&) {
  check_attention_args(score, indptr, indices, x);
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t num_rows = indptr.numel() - 1, H = score.size(1), C = x.size(1) / H;
  auto sc = score.contiguous(), xc = x.contiguous(), ic = indices.contiguous();
  auto out = at::empty({num_rows, H * C}, x.options());
  auto lse = at::empty({num_rows, H}, x.options());
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::segment_attention", [&] {
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      check_launch(cuda::segment_attention(indptr.data_ptr<index_t>(), ic.data_ptr<index_t>(),
                                           ptr<scalar_t>(sc), ptr<scalar_t>(xc), num_rows, H, C,
                                           ptr<scalar_t>(out), ptr<scalar_t>(lse), stream()),
                   "segment_attention");
    });
  });
  return {out, lse};
}

// segment_attention's backward from the other kernels, for the row shapes the fused kernels
// do not take: the softmax weights, the per-edge dot products <g_i, x_j> per head, and the
// transpose spmm of g weighted by them.
std::tuple<at::Tensor, at::Tensor> composed_attention_backward(
    const at::Tensor& score, const at::Tensor& out, const at::Tensor& grad,
    const c10::optional<at::Tensor>& grad_lse, const at::Tensor& indptr, const at::Tensor& indices,
    const at::Tensor& x, const at::Tensor& csc_indptr, const at::Tensor& csc_indices,
    const at::Tensor& csc_perm, bool need_score, bool need_x) {
  const int64_t E = score.size(0), H = score.size(1);
  const auto alpha = segment_softmax_cuda(score, indptr);
  at::Tensor grad_score = at::empty({0}, score.options()), grad_x = at::empty({0}, x.options());
  if (need_score) {
    const auto per_edge = sddmm_cuda(indptr, indices, x, grad, "dot", H, {}, {}, {});
    auto per_row = (grad * out).view({out.size(0), H, -1}).sum(-1);
    if (grad_lse) per_row = per_row - *grad_lse;
    grad_score = alpha * (per_edge - gather_csr_cuda(per_row.contiguous(), indptr, E));
  }
  if (need_x)
    grad_x = std::get<0>(
        reduce_cuda(csc_indptr, csc_indices, alpha.index_select(0, csc_perm), grad, Reduce::Sum));
  return {grad_score, grad_x};
}

std::tuple<at::Tensor, at::Tensor> segment_attention_backward_cuda(
    const at::Tensor& score, const at::Tensor& lse, const at::Tensor& out,
    const at::Tensor& grad_out, const c10::optional<at::Tensor>& grad_lse, const at::Tensor& indptr,
    const at::Tensor& indices, const at::Tensor& x, const at::Tensor& csc_indptr,
    const at::Tensor& csc_indices, const at::Tensor& csc_perm, bool need_score, bool need_x) {
  check_attention_args(score, indptr, indices, x);
  const int64_t H = score.size(1), C = x.size(1) / H;
  check_attention_backward_args(score.size(0), H, lse, out, grad_out, grad_lse, indptr, x,
                                csc_indptr, csc_indices, csc_perm);
  const c10::cuda::CUDAGuard guard(x.device());
  auto sc = score.contiguous(), lc = lse.contiguous(), oc = out.contiguous();
  auto gc = grad_out.contiguous(), xc = x.contiguous(), ic = indices.contiguous();
  auto glc = grad_lse ? grad_lse->contiguous() : at::Tensor();
  auto tc = csc_indices.contiguous(), pc = csc_perm.contiguous();
  bool fits = false;
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::segment_attention_backward", [&] {
    fits = cuda::attention_backward_fits(H, C, ptr<scalar_t>(xc), ptr<scalar_t>(oc),
                                         ptr<scalar_t>(gc));
  });
  if (!fits) {
    // bfloat16 in float32, as the fused kernels accumulate (rounding each intermediate
    // [E, H] tensor to bfloat16 moved gradients by up to 0.13)
    const auto wide = x.scalar_type() == at::kBFloat16 ? at::kFloat : x.scalar_type();
    auto [grad_score, grad_x] = composed_attention_backward(
        sc.to(wide), oc.to(wide), gc.to(wide),
        grad_lse ? c10::optional<at::Tensor>(glc.to(wide)) : c10::nullopt, indptr, ic, xc.to(wide),
        csc_indptr, tc, pc, need_score, need_x);
    return {grad_score.to(x.scalar_type()), grad_x.to(x.scalar_type())};
  }
  const int64_t rows = indptr.numel() - 1;
  auto grad_score = at::empty({need_score ? score.size(0) : 0, H}, score.options());
  auto grad_x = need_x ? at::empty_like(xc) : at::empty({0}, x.options());
  const auto acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  auto norm = at::empty({rows, H, 2}, x.options().dtype(acc));
  GL_DISPATCH_FLOAT(x.scalar_type(), "graphloc::segment_attention_backward", [&] {
    using acc_t = typename AccType<typename CudaType<scalar_t>::type>::type;
    GL_DISPATCH_INDEX(indptr.scalar_type(), [&] {
      cuda::AttentionBackward<typename CudaType<scalar_t>::type, index_t> args{
          indptr.data_ptr<index_t>(),
          ic.data_ptr<index_t>(),
          csc_indptr.data_ptr<index_t>(),
          tc.data_ptr<index_t>(),
          pc.data_ptr<index_t>(),
          ptr<scalar_t>(sc),
          ptr<scalar_t>(lc),
          ptr<scalar_t>(oc),
          ptr<scalar_t>(gc),
          ptr<scalar_t>(glc),
          ptr<scalar_t>(xc),
          rows,
          xc.size(0),
          H,
          C,
          need_score ? ptr<scalar_t>(grad_score) : nullptr,
          need_x ? ptr<scalar_t>(grad_x) : nullptr,
          rows ? norm.data_ptr<acc_t>() : nullptr};
      check_launch(cuda::segment_attention_backward(args, stream()), "segment_attention_backward");
    });
  });
  return {need_score ? grad_score : at::empty({0}, score.options()), grad_x};
}

// A stable radix sort (ATen's, CUB underneath) gives the permutation; a kernel finds the
// row pointers in the sorted keys.
std::tuple<at::Tensor, at::Tensor> coo_to_csr_cuda(const at::Tensor& index_arg, int64_t num_rows) {
  const auto index = index_arg.contiguous();  // a row of a transposed edge_index is strided
  check_index(index, "index");
  TORCH_CHECK(num_rows >= 0, "num_rows must be >= 0, got ", num_rows);
  const c10::cuda::CUDAGuard guard(index.device());
  if (index.numel()) {
    auto [low, high] = at::aminmax(index);
    const int64_t lo = low.item<int64_t>(), hi = high.item<int64_t>();
    TORCH_CHECK(lo >= 0 && hi < num_rows, "index holds ", lo < 0 ? lo : hi,
                " which is out of range for ", num_rows, " rows");
  }
  auto [sorted, perm] = at::sort(index, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  auto indptr = at::empty({num_rows + 1}, index.options());
  GL_DISPATCH_INDEX(index.scalar_type(), [&] {
    check_launch(cuda::csr_indptr_from_sorted(sorted.data_ptr<index_t>(), index.numel(), num_rows,
                                              indptr.data_ptr<index_t>(), stream()),
                 "coo_to_csr");
  });
  return {indptr, perm.to(index.scalar_type())};
}

// ATen ops (a gather of int64 entries): the positions are checked first, one host read as
// coo_to_csr's, so a bad one is an error rather than a device-side assert.
at::Tensor arg_sources_cuda(const at::Tensor& arg, const c10::optional<at::Tensor>& perm,
                            int64_t num_edges) {
  TORCH_CHECK(arg.scalar_type() == at::kInt || arg.scalar_type() == at::kLong,
              "arg must be int32 or int64, got ", arg.scalar_type());
  TORCH_CHECK(num_edges >= 0, "num_edges must be >= 0, got ", num_edges);
  const c10::cuda::CUDAGuard guard(arg.device());
  const auto flat = arg.reshape({-1});
  if (flat.numel()) {
    const auto [low, high] = at::aminmax(flat);
    const int64_t lo = low.item<int64_t>(), hi = high.item<int64_t>();
    const int64_t bad = lo < 0 ? lo : hi;
    TORCH_CHECK(lo >= 0 && hi <= num_edges, "arg (flattened)[",
                (flat == bad).nonzero()[0][0].item<int64_t>(), "] = ", bad,
                " is not a CSR position in [0, ", num_edges, "]");
  }
  if (!perm.has_value() || !perm->defined())
    return flat.to(at::kLong, false, true).view(arg.sizes());
  check_index(*perm, "perm");
  TORCH_CHECK(perm->numel() == num_edges, "perm has ", perm->numel(), " entries but num_edges is ",
              num_edges);
  check_same_device(*perm, "perm", arg, "arg");
  const auto table =
      at::cat({perm->to(at::kLong), at::full({1}, num_edges, perm->options().dtype(at::kLong))});
  return table.index_select(0, flat).view(arg.sizes());
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CUDA, m) {
  m.impl("spmm", &spmm_cuda);
  m.impl("segment_reduce", &segment_reduce_cuda);
  m.impl("spmm_arg_backward", &spmm_arg_backward_cuda);
  m.impl("gather_csr", &gather_csr_cuda);
  m.impl("gather_rows", &gather_rows_cuda);
  m.impl("sddmm", &sddmm_cuda);
  m.impl("segment_softmax", &segment_softmax_cuda);
  m.impl("segment_softmax_backward", &segment_softmax_backward_cuda);
  m.impl("segment_attention", &segment_attention_cuda);
  m.impl("segment_attention_backward", &segment_attention_backward_cuda);
  m.impl("coo_to_csr", &coo_to_csr_cuda);
  m.impl("arg_sources", &arg_sources_cuda);
  m.impl("csr_facts", &csr_facts_op);
}

}  // namespace graphloc
