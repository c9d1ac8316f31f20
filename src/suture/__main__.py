from suture.cli import main

main()
