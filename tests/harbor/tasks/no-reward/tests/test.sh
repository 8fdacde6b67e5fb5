#!/bin/bash
echo "this verifier forgets to write a reward"
