# Semantic FPN + Swin-S on ADE20K: the row of Wave-MLP Table 4 printed as "Swin-B†" (53.2M / 274G, 45.2 mIoU,
# reported; "results are from GFNet"). These are GFNet's Swin-S figures: this model measures 53.21M, a Swin-B
# one far more; the row printed as "Swin-S†" (31.9M) is GFNet's Swin-Ti (./fpn_swin-t_4xb8-40k_ade20k-512x512.py).
# Model: mmseg's Semantic FPN (fpn_r50) on mmseg's SwinTransformer with the Swin-S settings of mmseg's
# swin/swin-small-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py (depths 2/2/18/2, window 7,
# drop path 0.3, its ImageNet-1k checkpoint).
# Recipe: GFNet states none beyond following PVT's Semantic FPN; we train it like the table's Wave-MLP rows
# (../fpn_wavemlp-t_4xb8-40k_ade20k-512x512.py, PVT's recipe: 40k iterations, batch 32 = 4 GPUs x 8, AdamW lr
# 1e-4, wd 1e-4, poly 0.9, 512x512 crops), not mmseg's UperNet Swin recipe.
_base_ = '../fpn_wavemlp-t_4xb8-40k_ade20k-512x512.py'

checkpoint_file = 'https://download.openmmlab.com/mmsegmentation/v0.5/pretrain/swin/swin_small_patch4_window7_224_20220317-7ba6d6dd.pth'  # noqa
model = dict(
    backbone=dict(
        _delete_=True,
        type='SwinTransformer',
        pretrain_img_size=224,
        embed_dims=96,
        patch_size=4,
        window_size=7,
        mlp_ratio=4,
        depths=[2, 2, 18, 2],
        num_heads=[3, 6, 12, 24],
        strides=(4, 2, 2, 2),
        out_indices=(0, 1, 2, 3),
        qkv_bias=True,
        qk_scale=None,
        patch_norm=True,
        drop_rate=0.,
        attn_drop_rate=0.,
        drop_path_rate=0.3,
        use_abs_pos_embed=False,
        act_cfg=dict(type='GELU'),
        norm_cfg=dict(type='LN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint=checkpoint_file)),
    neck=dict(in_channels=[96, 192, 384, 768]))
