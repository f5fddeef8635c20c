# Wave-MLP Table 7 (token-FC window 5 on Wave-MLP-T*): 79.8 top-1 (paper; 15M, 2.1G). Recipe:
# ../wavemlp-t-dw_8xb128_in1k.py. (The "All" row, a token-FC over the whole map, depends on the input
# size and is not supported.)
_base_ = ['../wavemlp-t-dw_8xb128_in1k.py']
model = dict(backbone=dict(window_size=5))
