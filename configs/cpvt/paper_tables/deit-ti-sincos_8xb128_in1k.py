# CPVT Table 1 / Table 7 / Table 2 "DeiT-tiny (sin)": DeiT-tiny with a fixed 2-D sine-cosine absolute
# position encoding instead of the learnable table: 72.3 top-1 (paper; 70.8 at 384). The paper does not
# give its sin-cos layout; we use MoCo v3's / mmpretrain's build_2d_sincos_position_embedding (row, column
# quarters, temperature 10000, zero vector for the cls token), recomputed for every input grid.
# Recipe: ../cpvt-ti_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-ti_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(), pos_embed_type='sincos'))
