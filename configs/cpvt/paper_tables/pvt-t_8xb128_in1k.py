# PVT-tiny on ImageNet-1k: the PVT v1 baseline of CPVT Table 13 (75.0 top-1, reported; the PVT paper's
# number). PVT v1 (Wang et al., ICCV 2021) = PVTPEG with its options: a learnable position table per
# stage (56/28/14/7 grids at 224, bilinearly resized elsewhere), the class token prepended to stage 4's
# tokens, no PEG, classified from the class token after the final LayerNorm. Equal to the official
# github.com/whai362/PVT pvt_tiny (13,229,288 params; tests/test_pvt_v1.py); its released pvt_tiny.pth
# converts with tools/model_converters/pcpvt2mmposmlp.py.
# Recipe: PVT v1's own (its classification/configs/pvt/pvt_tiny.py on the DeiT trainer): the +PEG+GAP
# row's (../pvt-peg-t-gap_8xb128_in1k.py: AdamW lr 5e-4 x 1024/512, wd 0.05, 300 epochs, drop path 0.1)
# without its grad clipping. As PVT v1's no_weight_decay: no decay on the class token, the position tables
# decayed.
_base_ = '../pvt-peg-t-gap_8xb128_in1k.py'

model = dict(
    backbone=dict(pos_embed_type='learnable', peg_after_block=None, with_cls_token=True, out_type='cls_token'),
    neck=None)

optim_wrapper = dict(
    paramwise_cfg=dict(
        _delete_=True, norm_decay_mult=0.0, bias_decay_mult=0.0, custom_keys={'cls_token': dict(decay_mult=0.0)}),
    clip_grad=None)
