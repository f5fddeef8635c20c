# PosMLP Table 1 (gMLP / SGU, 72.14) = Table 3 "gMLP (original)" (19.4M, 4.42G, 72.18 / 90.52) = Table 10
# "Original" (19.4M, 4.42G, 72.18): the isotropic gMLP-S of Liu et al. 2021 (patch 16, 30 blocks, d = 256,
# d_ffn = 1536) with its spatial gating unit (LayerNorm on X1 + dense token FC W over the 14x14 grid).
# ImageNet-1K^0.5 protocol of ./posmlp-t_8xb120_in1k-half.py (same half, same recipe): the paper states no
# other recipe for its gMLP rows. Stochastic depth 0.05 is gMLP-S's own (gMLP paper, Table 1: survival
# probability 0.95 for gMLP-S); gMLP has no dropout, so the PosMLP-T recipe's dropout 0.02333 does not apply.
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(
    backbone=dict(_delete_=True, type='mmposmlp.GMLP', arch='s', img_size=224, gate_type='sgu',
                  drop_path_rate=0.05, out_indices=(-1, )),
    head=dict(in_channels=256))
