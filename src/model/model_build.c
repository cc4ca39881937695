/* model_build.c: the forward graph of the llama, qwen2 and qwen3 architectures, one builder with
 * the differences as data: Q/K/V biases (qwen2), per-head Q/K RMSNorm before RoPE (qwen3), RoPE
 * pairing (normal for llama, NEOX for the Qwen models), optional output bias.
 *
 * Per layer (pre-norm residual blocks):
 *   h = rmsnorm(x) * attn_norm
 *   q, k, v = h Wq + bq, h Wk + bk, h Wv + bv      -> {hd, nh | nkv, nt}
 *   q, k = rmsnorm_per_head(q, k) (qwen3); q, k = rope(q, k; pos)
 *   store k, v in the cache at each token's cell; a = attention(q; cells of its sequence, pos <= own)
 *   x = x + a Wo;  x = x + down(silu(gate(h')) * up(h')) with h' = rmsnorm(x) * ffn_norm
 * In the last layer only the rows whose logits are wanted continue after attention (OUT_IDS). */
#include "model/model.h"

mf_status mf_model_build_graph(const mf_model *m, int32_t n_tokens, int32_t n_outputs, mf_graph *g) {
    const mf_hparams *hp = &m->hp;
    MF_ASSERT(n_tokens > 0 && n_outputs > 0 && n_outputs <= n_tokens);
    mf_graph_init(g);
    const int64_t nt = n_tokens, hd = hp->head_dim, nh = hp->n_head, nkv = hp->n_head_kv;
    int32_t tok = mf_graph_input(g, MF_INPUT_TOKENS, nt);
    int32_t pos = mf_graph_input(g, MF_INPUT_POS, nt);
    int32_t seq = mf_graph_input(g, MF_INPUT_SEQ, nt);
    int32_t cells = mf_graph_input(g, MF_INPUT_CELLS, nt);
    int32_t out_ids = n_outputs < n_tokens ? mf_graph_input(g, MF_INPUT_OUT_IDS, n_outputs) : -1;

    int32_t x = mf_graph_name(g, mf_graph_get_rows(g, m->tok_embd, tok), "inp_embd");
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const mf_layer *L = &m->layers[l];
        int32_t h = mf_graph_name(g, mf_graph_rms_norm(g, x, L->attn_norm, hp->norm_eps), "attn_norm-%d", l);
        int32_t q = mf_graph_name(g, mf_graph_matmul(g, h, L->wq, L->bq), "Qcur-%d", l);
        int32_t k = mf_graph_name(g, mf_graph_matmul(g, h, L->wk, L->bk), "Kcur-%d", l);
        int32_t v = mf_graph_name(g, mf_graph_matmul(g, h, L->wv, L->bv), "Vcur-%d", l);
        q = mf_graph_name(g, mf_graph_reshape_3d(g, q, hd, nh, nt), "Qcur-%d (heads)", l);
        k = mf_graph_name(g, mf_graph_reshape_3d(g, k, hd, nkv, nt), "Kcur-%d (heads)", l);
        v = mf_graph_name(g, mf_graph_reshape_3d(g, v, hd, nkv, nt), "Vcur-%d (heads)", l);
        if (L->q_norm) q = mf_graph_name(g, mf_graph_rms_norm(g, q, L->q_norm, hp->norm_eps), "Qcur_norm-%d", l);
        if (L->k_norm) k = mf_graph_name(g, mf_graph_rms_norm(g, k, L->k_norm, hp->norm_eps), "Kcur_norm-%d", l);
        q = mf_graph_name(g, mf_graph_rope(g, q, pos, &hp->rope), "Qrope-%d", l);
        k = mf_graph_name(g, mf_graph_rope(g, k, pos, &hp->rope), "Krope-%d", l);
        int32_t st = mf_graph_name(g, mf_graph_kv_store(g, k, v, cells, l), "kv_store-%d", l);
        mf_attn_params ap = {.layer = l, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim,
                             .scale = hp->attn_scale};
        int32_t a = mf_graph_name(g, mf_graph_attention(g, q, pos, seq, st, &ap), "attn-%d", l);
        int32_t o = mf_graph_name(g, mf_graph_matmul(g, a, L->wo, NULL), "attn_out-%d", l);
        if (l == hp->n_layer - 1 && out_ids >= 0) {
            o = mf_graph_name(g, mf_graph_get_rows_f32(g, o, out_ids), "attn_out_rows-%d", l);
            x = mf_graph_name(g, mf_graph_get_rows_f32(g, x, out_ids), "inp_rows-%d", l);
        }
        x = mf_graph_name(g, mf_graph_add(g, o, x), "ffn_inp-%d", l);
        h = mf_graph_name(g, mf_graph_rms_norm(g, x, L->ffn_norm, hp->norm_eps), "ffn_norm-%d", l);
        int32_t gate = mf_graph_name(g, mf_graph_matmul(g, h, L->ffn_gate, NULL), "ffn_gate-%d", l);
        int32_t up = mf_graph_name(g, mf_graph_matmul(g, h, L->ffn_up, NULL), "ffn_up-%d", l);
        gate = mf_graph_name(g, mf_graph_silu(g, gate), "ffn_silu-%d", l);
        int32_t f = mf_graph_name(g, mf_graph_mul(g, gate, up), "ffn_gate_par-%d", l);
        f = mf_graph_name(g, mf_graph_matmul(g, f, L->ffn_down, NULL), "ffn_out-%d", l);
        x = mf_graph_name(g, mf_graph_add(g, f, x), "l_out-%d", l);
    }
    x = mf_graph_name(g, mf_graph_rms_norm(g, x, m->output_norm, hp->norm_eps), "result_norm");
    x = mf_graph_name(g, mf_graph_matmul(g, x, m->output, m->output_b), "result_output");
    mf_graph_set_output(g, x);
    if (g->status) mf_graph_free(g);
    return g->status;
}
