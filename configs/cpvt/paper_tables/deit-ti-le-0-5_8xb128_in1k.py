# CPVT Sec. 5.3 (text after Table 8, no table): "We use LE not only at the beginning but also in the next 5 layers
# to have a similar thing as 0-5 PEG configuration. This setting achieves 72.7% top-1 accuracy" (paper), against
# CPVT-Ti 0-5 (73.4, ../cpvt-ti_8xb128_in1k.py) and DeiT-tiny with LE at the beginning only (72.2,
# deit-ti-le_8xb128_in1k.py, whose model and recipe this derives from: DeiT, Table 10). No PEG.
# What the paper leaves open, and our choice:
# * where: "the beginning" = DeiT's table, added with the cls token before encoder 0 (position -1); "the next 5
#   layers" = the places of the 0-5 PEGs, i.e. after encoders 0..4 (positions 0..4), so
#   pos_embed_positions=(-1, 0, 1, 2, 3, 4);
# * one table per position, each its own learnable parameter (as the 0-5 PEGs are each their own conv), each a
#   full DeiT LE table of 197 x 192 with a row for the cls token (the same LE repeated; a PEG leaves the cls
#   token alone, an LE does not), trunc-normal .02 init and no weight decay, like DeiT's;
# * at other input sizes every table is resized bicubically, as DeiT's is.
# Params: DeiT-tiny 5,717,416 + 5 x 197 x 192 = 5,906,536.
_base_ = ['./deit-ti-le_8xb128_in1k.py']
model = dict(backbone=dict(pos_embed_positions=(-1, 0, 1, 2, 3, 4)))

optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'.block_pos_embeds.': dict(decay_mult=0.0)}))
