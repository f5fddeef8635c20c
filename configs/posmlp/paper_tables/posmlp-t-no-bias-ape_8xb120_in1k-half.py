# PosMLP Table 7 (no bias b, with APE; 77.3 top-1): a learned sqrt(N) x sqrt(N) x C absolute position
# embedding added to the tokens before the first stage (ViT style; 56 x 56 x 96 at 224^2, the
# official ``ape=True``).
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_cfg=dict(token_bias=False), ape_size=(56, 56)))
# like Swin's absolute_pos_embed, the APE is not weight-decayed
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'absolute_pos_embed': dict(decay_mult=0.)}))
