# DeiT-Ti ablation: Table 4 "AGeLU" (53.3 top-1, reported; no params/FLOPs in the paper): every block's MLP
# replaced by the sum of 4C = 768 AGeLUs, y = AGeLU_1(x) + ... + AGeLU_4C(x) (Sec. 4.1 / 5.2),
# mmposmlp.ActivationSum: each AGeLU_k has its own per-channel alpha, beta, gamma, theta (4 x 768 x 192
# parameters per block). The paper does not say how it was made to fit in memory: our module sums in chunks
# of 64 functions, and autograd keeps every chunk (use with_cp or small batches).
# Same as ../deit-ti-imlp_4xb256_in1k.py (DeiT's recipe) except the FFN; its AGeLU parameters are 2-D
# (functions x channels), so they are exempted from weight decay by name, as the IMLP's 1-D AGeLUs are.
_base_ = '../deit-ti-imlp_4xb256_in1k.py'

model = dict(backbone=dict(ffn_cfg=dict(_delete_=True, type='mmposmlp.ActivationSum', act_cfg=dict(type='AGeLU'))))
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={
    '.ffn.alpha': dict(decay_mult=0.0), '.ffn.beta': dict(decay_mult=0.0),
    '.ffn.gamma': dict(decay_mult=0.0), '.ffn.theta': dict(decay_mult=0.0)}))
