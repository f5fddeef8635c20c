# DeiT-Ti ablation: Table 4 "GeLU" (50.4 top-1, reported; no params/FLOPs in the paper): every block's MLP
# replaced by the sum of 4C = 768 element-wise GeLUs, y = GeLU_1(x) + ... + GeLU_4C(x) (Sec. 4.1 / 5.2),
# mmposmlp.ActivationSum. Identical GeLUs make this 768 * GeLU(x): no parameters in the FFN.
# Same as ../deit-ti-imlp_4xb256_in1k.py (DeiT's recipe) except the FFN.
_base_ = '../deit-ti-imlp_4xb256_in1k.py'

model = dict(backbone=dict(ffn_cfg=dict(_delete_=True, type='mmposmlp.ActivationSum', act_cfg=dict(type='GELU'))))
