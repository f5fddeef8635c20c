# PosMLP Table 4 (group numbers s per stage = (1,1,1,1), 76.70 top-1): PosMLP-T, GGQPE.
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(arch=dict(_delete_=True, embed_dims=[96, 192, 384, 768], groups=[1, 1, 1, 1])))
