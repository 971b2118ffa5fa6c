# SGLang launch command exported by autospec from study 'made', trial 1 (knee pick)
# measured: output_tok_s@c1 = 250.0 +-2.5 tok/s, agg_output_tok_s@c32 = 1650.0 +-16.5 tok/s
SGLANG_ENABLE_SPEC_V2=1 python -m sglang.launch_server \
    --model-path /models/target \
    --speculative-algorithm EAGLE \
    --speculative-draft-model-path /models/eagle \
    --attention-backend triton \
    --speculative-num-steps 4 \
    --speculative-eagle-topk 1 \
    --mem-fraction-static 0.86 \
    --speculative-num-draft-tokens 5 \
    --host 127.0.0.1 \
    --port 30000
