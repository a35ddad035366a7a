// The op surface of graphloc at a glance: every schema in one block. Kernels register per
// backend in cpu/*.cpp and cuda/binding.cpp; fake kernels and autograd live in Python
// (graphloc/ops/_library.py). CSR arrays are destination-major: row i lists the edges into i.
#include <Python.h>
#include <torch/library.h>

extern "C" {
// Lets `import graphloc._C` load the library (and so run the registrations below) without
// pybind11; the module itself is empty.
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
}

TORCH_LIBRARY(graphloc, m) {
  // out[i] = reduce_{e in row i} value[e] * x[indices[e]]; arg (index dtype) holds the winning
  // CSR position for max/min (E for empty rows) and is empty otherwise. The csc_* arguments (the
  // cached transpose) are only read by the backward. With value_index (sum only), entry e's
  // value is value[value_index[e]]: the backward's product over the transpose reads the edge
  // weights through csc_perm (or a mean's 1 / degree through csc_indices) without a permuted
  // copy of them. csc_value (sum only, with value and the transpose): value[csc_perm], a copy
  // the caller keeps for weights it reuses; the backward then reads it in order instead of
  // through csc_perm. Like the csc_* arguments, it is trusted to match them (checking it
  // would cost the gather it saves).
  m.def(
      "spmm(Tensor indptr, Tensor indices, Tensor? value, Tensor x, str reduce, "
      "Tensor? csc_indptr=None, Tensor? csc_indices=None, Tensor? csc_perm=None, "
      "Tensor? value_index=None, Tensor? csc_value=None) -> (Tensor, Tensor)");
  // out[i] = reduce_{e in row i} src[e]: spmm with the rows read in place.
  m.def("segment_reduce(Tensor src, Tensor indptr, str reduce) -> (Tensor, Tensor)");
  // Backward of max/min spmm over the transpose: (grad_x, grad_value or empty).
  m.def(
      "spmm_arg_backward(Tensor csc_indptr, Tensor csc_indices, Tensor csc_perm, "
      "Tensor? value, Tensor x, Tensor arg, Tensor grad_out, bool need_value_grad) "
      "-> (Tensor, Tensor)");
  // out[e] = src[row of e]: the inverse of segment_reduce(sum).
  m.def("gather_csr(Tensor src, Tensor indptr, int num_edges) -> Tensor");
  // out[k] = src[index[k]]: index_select(0) of rows, for the edge tensors moved between the
  // user's edge order and CSR order.
  m.def("gather_rows(Tensor src, Tensor index) -> Tensor");
  // x * (keep ? 1 / (1 - p) : 0) per element, keep a hash of (seed, element index) with
  // probability 1 - p (CPU; graphloc.ops.dropout computes the same mask elsewhere). The seed
  // is a one-element int64 tensor, drawn by a traced random op under torch.compile.
  m.def("dropout(Tensor x, float p, Tensor seed) -> Tensor");
  // Per-edge op(a[indices[e]], b[row of e]): dot -> [E, heads], add / mul -> [E, K].
  m.def(
      "sddmm(Tensor indptr, Tensor indices, Tensor a, Tensor b, str op, int heads, "
      "Tensor? csc_indptr=None, Tensor? csc_indices=None, Tensor? csc_perm=None) -> Tensor");
  // Softmax of score [E, H] over each row's edges, and its backward.
  m.def("segment_softmax(Tensor score, Tensor indptr) -> Tensor");
  m.def("segment_softmax_backward(Tensor out, Tensor grad, Tensor indptr) -> Tensor");
  // out[i] = sum_{e in row i} softmax_row(score)[e, h] * x[indices[e], h-th channel block],
  // in one online pass; lse [N, H] is the log-sum-exp of each row's scores (for backward).
  m.def(
      "segment_attention(Tensor score, Tensor indptr, Tensor indices, Tensor x, "
      "Tensor? csc_indptr=None, Tensor? csc_indices=None, Tensor? csc_perm=None) "
      "-> (Tensor, Tensor)");
  // Both gradients of segment_attention (CPU and CUDA): d score [E, H] over the CSR rows and d x
  // [N, heads * C] over the transpose, the weights recomputed from lse. Empty tensors for
  // the gradients not asked for.
  m.def(
      "segment_attention_backward(Tensor score, Tensor lse, Tensor out, Tensor grad_out, "
      "Tensor? grad_lse, Tensor indptr, Tensor indices, Tensor x, Tensor csc_indptr, "
      "Tensor csc_indices, Tensor csc_perm, bool need_score, bool need_x) "
      "-> (Tensor, Tensor)");
  // GAT's attention: segment_attention with the scores leaky_relu(a_src[indices[e]] + a_dst[i])
  // per edge of row i and head, computed inside the kernel (CPU; other devices compose
  // sddmm, leaky_relu and segment_attention). Returns out and norm [2, rows, heads], each
  // row's shift (its max score) and sum of exp(score - shift) per head, for the backward.
  m.def(
      "additive_attention(Tensor a_src, Tensor a_dst, float negative_slope, Tensor indptr, "
      "Tensor indices, Tensor x, Tensor? csc_indptr=None, Tensor? csc_indices=None, "
      "Tensor? csc_perm=None) -> (Tensor, Tensor)");
  // Its gradients (d a_src, d a_dst, d x), empty tensors for those not asked for.
  m.def(
      "additive_attention_backward(Tensor a_src, Tensor a_dst, float negative_slope, Tensor norm, "
      "Tensor out, Tensor grad_out, Tensor indptr, Tensor indices, Tensor x, "
      "Tensor csc_indptr, Tensor csc_indices, Tensor csc_perm, bool need_scores, bool need_x) "
      "-> (Tensor, Tensor, Tensor)");
  // GATv2's scores: per edge (j -> i) of row i and head h, sum_c att[h, c] *
  // leaky_relu(src[j, h*C + c] + dst[i, h*C + c]), [E, heads] (CPU; other devices compose
  // sddmm, leaky_relu and a product with att).
  m.def(
      "gatv2_scores(Tensor indptr, Tensor indices, Tensor src, Tensor dst, Tensor att, "
      "float negative_slope, Tensor? csc_indptr=None, Tensor? csc_indices=None, "
      "Tensor? csc_perm=None) -> Tensor");
  // Its gradients (d src, d dst, d att), empty tensors for those not asked for.
  m.def(
      "gatv2_scores_backward(Tensor indptr, Tensor indices, Tensor src, Tensor dst, Tensor att, "
      "float negative_slope, Tensor grad, Tensor csc_indptr, Tensor csc_indices, "
      "Tensor csc_perm, bool need_src, bool need_dst, bool need_att) -> (Tensor, Tensor, Tensor)");
  // GAT's per-node score halves: out[n, a * H + h] = sum_c x[n, h * C + c] * att[a, h, c] for
  // rows x [N, H * C] and attention vectors att [A, H, C], [N, A * H] (CPU; other devices
  // compose a product).
  m.def("head_dots(Tensor x, Tensor att) -> Tensor");
  // Its gradients (d x, d att), empty tensors for those not asked for.
  m.def(
      "head_dots_backward(Tensor x, Tensor att, Tensor grad, bool need_x, bool need_att) "
      "-> (Tensor, Tensor)");
  // The residual gated graph conv's aggregation: per edge (j -> i) of row i and channel c,
  // out[i, c] = sum of sigmoid(key[i, c] + query[j, c]) * value[j, c], [rows, C] (CPU; other
  // devices compose sddmm, sigmoid and a weighted spmm).
  m.def(
      "gated_sum(Tensor indptr, Tensor indices, Tensor key, Tensor query, Tensor value, "
      "Tensor? csc_indptr=None, Tensor? csc_indices=None, Tensor? csc_perm=None) -> Tensor");
  // Its gradients (d key, d query, d value), empty tensors for those not asked for.
  m.def(
      "gated_sum_backward(Tensor indptr, Tensor indices, Tensor key, Tensor query, Tensor value, "
      "Tensor grad, Tensor csc_indptr, Tensor csc_indices, Tensor csc_perm, bool need_key, "
      "bool need_query, bool need_value) -> (Tensor, Tensor, Tensor)");
  // The FiLM conv's aggregation: per edge (j -> i) of row i and channel c, out[i, c] = sum of
  // relu(gamma[i, c] * value[j, c] + beta[i, c]), [rows, C] (CPU; other devices compose the
  // per-edge messages).
  m.def(
      "film_sum(Tensor indptr, Tensor indices, Tensor gamma, Tensor beta, Tensor value, "
      "Tensor? csc_indptr=None, Tensor? csc_indices=None, Tensor? csc_perm=None) -> Tensor");
  // Its gradients (d gamma, d beta, d value), empty tensors for those not asked for.
  m.def(
      "film_sum_backward(Tensor indptr, Tensor indices, Tensor gamma, Tensor beta, Tensor value, "
      "Tensor grad, Tensor csc_indptr, Tensor csc_indices, Tensor csc_perm, bool need_gamma, "
      "bool need_beta, bool need_value) -> (Tensor, Tensor, Tensor)");
  // The edge-conditioned (NNConv) aggregation: per CSR row i, the sum over i's edges e of the
  // outer product weight[e] (x) x[indices[e]], out [rows, K * C] for weight [E, K] (in CSR
  // order) and x [N_src, C] (CPU; other devices compose the per-edge products). The csc_*
  // arguments (the cached transpose) are only read by the backward.
  m.def(
      "edge_outer_sum(Tensor indptr, Tensor indices, Tensor weight, Tensor x, "
      "Tensor? csc_indptr=None, Tensor? csc_indices=None, Tensor? csc_perm=None) -> Tensor");
  // Its gradients over the CSR rows: d weight [E, K], and per edge the source's share
  // sum_k weight[e, k] * grad[i, k, :] ([E, C], summed per source by the caller through the
  // transpose). Empty tensors for those not asked for.
  m.def(
      "edge_outer_sum_backward(Tensor indptr, Tensor indices, Tensor weight, Tensor x, "
      "Tensor grad, bool need_weight, bool need_x) -> (Tensor, Tensor)");
  // DeeperGCN's softmax aggregation: per CSR row i and channel k, the sum over i's edges of
  // softmax_e(t[k] * x[indices[e], k]) * x[indices[e], k] (t [K], one dtype with x), and
  // norm [2, rows, K] in float32 (float64 for float64 x): each row's shift and softmax sum
  // per channel, which the backward reads. detach_scores and the csc_* arguments (the
  // cached transpose) are only read by the backward. CPU.
  m.def(
      "softmax_sum(Tensor x, Tensor t, Tensor indptr, Tensor indices, bool detach_scores, "
      "Tensor? csc_indptr=None, Tensor? csc_indices=None, Tensor? csc_perm=None) -> "
      "(Tensor, Tensor)");
  // softmax_sum's gradients over the transpose: (grad_x or empty, grad_t or empty); with
  // detach_scores, x's only through the values and none for t. CPU.
  m.def(
      "softmax_sum_backward(Tensor x, Tensor t, Tensor out, Tensor norm, Tensor grad, "
      "Tensor indptr, Tensor indices, Tensor csc_indptr, Tensor csc_indices, Tensor csc_perm, "
      "bool detach_scores, bool need_x, bool need_t) -> (Tensor, Tensor)");
  // Per node: the largest length-weighted distance to a node of its hops-hop ball, inside
  // the ball's induced subgraph (City-Networks' local eccentricity); float64 [N]. CPU.
  m.def("local_eccentricity(Tensor indptr, Tensor indices, Tensor weight, int hops) -> Tensor");
  // Per seed, the k-hop ball over in-edges (BFS order, seed first, with hop distances) and
  // its induced edges in ball-local ids, packed: (node_ptr [S+1], nodes, hops, edge_ptr
  // [S+1], edge_src, edge_dst, edge_pos = the edge's CSR position). CPU.
  m.def(
      "khop_subgraphs(Tensor indptr, Tensor indices, Tensor seeds, int hops) -> "
      "(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  // For each node i and each node j reaching i within hops steps: the weighted number of
  // walks j -> ... -> i of each length 0..hops (rows of A^0..A^hops, A[i, j] the weight of
  // j -> i; weight float64 per CSR entry, or 1): (indptr [N+1], indices ascending per row,
  // counts float64 [nnz, hops + 1]). Refuses more than max_entries pairs. CPU.
  m.def(
      "walk_counts(Tensor indptr, Tensor indices, Tensor? weight, int hops, int max_entries) -> "
      "(Tensor, Tensor, Tensor)");
  // Greedy round per seed (int64 [S], from 0) such that the in-balls of radius hops of the
  // seeds of one round are pairwise disjoint; (t_indptr, t_indices) is the transpose CSR
  // (out-edges). Seeds must be distinct. CPU.
  m.def(
      "separated_rounds(Tensor indptr, Tensor indices, Tensor t_indptr, Tensor t_indices, "
      "Tensor seeds, int hops) -> Tensor");
  // Layer-wise sampling of in-neighbours around seeds over R relations (CSRs of
  // destination-major rows, relation r from node type src_types[r] to dst_types[r]) of T node
  // types (num_nodes[t] nodes; seeds[t] int64, repeats allowed). fanouts [R * hops]: relation
  // r's fan-out at each hop (-1: all). Uniform without replacement unless replace; disjoint:
  // one tree per seed; induced: the edges are then every edge between sampled nodes.
  // Optional rules (empty lists / tensors: none): node_times (int64 per node of a type) or
  // edge_times (int64 per CSR entry of a relation) keep only the entries at or before the
  // tree's seed_times entry (disjoint only), the latest k of them with last; edge_weights
  // (float64 per CSR entry) draw by weight. Returns, per type then per relation: nodes (seeds
  // first), trees (disjoint), cumulative node counts per hop; edge sources, destinations
  // (local ids), CSR positions, cumulative edge counts per hop. Deterministic for a given
  // seed. CPU.
  m.def(
      "neighbor_sample(Tensor[] indptrs, Tensor[] indices, int[] src_types, int[] dst_types, "
      "int[] num_nodes, Tensor[] seeds, int[] fanouts, bool replace, bool disjoint, "
      "bool induced, int seed, Tensor[] node_times, Tensor[] edge_times, "
      "Tensor? seed_times, Tensor[] edge_weights, bool last) -> Tensor[]");
  // node2vec's random walks along a source-major CSR (row j: the edges out of j) from each
  // start node (int64 [S]): nodes [S, walk_length + 1] and the CSR positions taken
  // [S, walk_length] (-1 where a node without out-edges keeps the walk in place). From v,
  // come from t, the entry to x weighs 1/p if x == t, 1 if the CSR has x -> t, 1/q
  // otherwise (exact rejection sampling); the first step draws uniformly. Deterministic for
  // a given seed. With edge_ids (int64 per CSR position), the entries taken are reported
  // as edge_ids[position]. sorted_rows: the caller vouches that each row's indices are
  // sorted (the test for x -> t is then a binary search; trusted, not checked). CPU.
  m.def(
      "random_walk(Tensor indptr, Tensor indices, Tensor start, int walk_length, float p, "
      "float q, int seed, Tensor? edge_ids, bool sorted_rows) -> (Tensor, Tensor)");
  // Graclus's greedy matching (Dhillon et al., PAMI 2007) along a source-major CSR, nodes
  // visited in `order` (a permutation): an unmatched node pairs with its first unmatched
  // out-neighbour, or with weight (float64 per CSR position, >= 0) the heaviest (ties to the
  // later entry); both take the smaller id as cluster; self-loops never pair. int64 [N]. CPU.
  m.def("graclus(Tensor indptr, Tensor indices, Tensor order, Tensor? weight) -> Tensor");
  // METIS's multilevel partitioning of a symmetric CSR without self-loops into num_parts
  // parts: heavy-edge coarsening, grown recursive bisection of the coarsest graph, greedy
  // boundary refinement under each part's limit (its share plus `tolerance` per mille);
  // `recursive`: recursive multilevel bisection. Weights int64 >= 0 (node_weight [N],
  // edge_weight per CSR position; absent: 1). int64 [N] part ids, deterministic per seed. CPU.
  m.def(
      "partition(Tensor indptr, Tensor indices, Tensor? node_weight, Tensor? edge_weight, "
      "int num_parts, bool recursive, int tolerance, int seed) -> Tensor");
  // Per node v, K tokens: v, then K - 1 draws without replacement from the list of its
  // distinct in-neighbours followed by the distinct nodes two in-steps away (v included
  // when reached), as LargeGT's official code; shorter lists repeat in list order, empty
  // ones give distinct random nodes. [N, K] int64, deterministic for a given seed. CPU.
  m.def("hop2_sample(Tensor indptr, Tensor indices, int K, int seed) -> Tensor");
  // What the argument checks read of a CSR's indptr and / or an index, as int64 on the CPU:
  // [indptr[0], indptr[-1], smallest step (0 without steps), smallest and largest index
  // (0 and -1 when empty)], read back in one copy on any device.
  m.def("csr_facts(Tensor? indptr, Tensor? index) -> Tensor");
  // Stable counting sort of index into (indptr [num_rows + 1], perm [E]).
  m.def("coo_to_csr(Tensor index, int num_rows) -> (Tensor, Tensor)");
  // The max/min winners' CSR positions (spmm's or segment_reduce's arg; num_edges for an
  // empty row) as int64 source rows: perm[arg] (arg itself without perm), where num_edges
  // stays num_edges.
  m.def("arg_sources(Tensor arg, Tensor? perm, int num_edges) -> Tensor");
  // Per CSR row and channel: log(eps + sum exp(x[indices[e]] - s)) + max over the row's edges
  // (x's rows in order without indices), s the max or 0 for a row of only -inf; rows without
  // edges give 0. CPU.
  m.def("segment_logsumexp(Tensor x, Tensor indptr, Tensor? indices, float eps) -> Tensor");
  // The softmax (log: log-softmax, log(eps + sum) as segment_logsumexp's) of each CSR row's
  // rows of x, per channel, computed in float32 or float64 and written at each row's own
  // position: x-shaped. indices, when given, must list every row of x once. CPU.
  m.def(
      "segment_softmax_rows(Tensor x, Tensor indptr, Tensor? indices, float eps, bool log) -> "
      "Tensor");
  // segment_logsumexp's per-edge gradient [E, K]: exp(x[indices[e]] - norm[i]) * grad[i] for
  // each CSR position e of row i (norm: the output, log(eps) where it is -inf). CPU.
  m.def(
      "logsumexp_edge_grad(Tensor x, Tensor indptr, Tensor? indices, Tensor norm, Tensor grad) "
      "-> Tensor");
  // Per row of y, the indices of its k nearest rows of x in its example (rows ptr_x[b] to
  // ptr_x[b + 1] of x for rows ptr_y[b] to ptr_y[b + 1] of y; x and y float64): [M, k] int64,
  // ranked by (finite, infinite, NaN distance; distance; index), -1 past the example's
  // points; exclude_self (x and y the same rows) keeps row i out of row i's list; a finite
  // `within` keeps only squared distances below it (radius search). CPU.
  m.def(
      "knn(Tensor x, Tensor y, Tensor ptr_x, Tensor ptr_y, int k, bool exclude_self, "
      "float within) -> Tensor");
}
