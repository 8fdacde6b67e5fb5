#!/bin/bash
echo two > two.txt
