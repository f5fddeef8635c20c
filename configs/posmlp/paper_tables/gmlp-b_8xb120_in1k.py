# PosMLP Table 2, row "gMLP-B [35]" (73M params, 15.8G FLOPs, 81.6 top-1 on ImageNet-1k; reported from the gMLP
# paper, Liu et al. 2021): the isotropic gMLP-B (patch 16, 30 blocks, d = 512, d_ffn = 3072, SGU), timm's
# gmlp_b16_224 parameter for parameter. Recipe as ./gmlp-s_8xb120_in1k.py (the PosMLP ImageNet recipe, the
# nearest one the papers here state). Assumed from the gMLP paper (Table 1 there, recalled, not checked
# against a stored copy): survival probability 0.80 for gMLP-B (drop path 0.2).
_base_ = ['./gmlp-s_8xb120_in1k.py']
model = dict(backbone=dict(arch='b', drop_path_rate=0.2), head=dict(in_channels=512))
